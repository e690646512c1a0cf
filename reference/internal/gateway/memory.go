package gateway

import (
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
)

// Memory is what the gateway's streams hold in memory, with the bounds that hold it: the figures
// the live channel and the session streams report, the streams open now, and what one stream
// may hold at most.
//
// An event stream holds its live queue, at most Config.MaxPendingBytes (past it the stream ends
// with a reconnect event, reason slow-consumer, and its client resumes from its cursor), and
// reads the tail of its conversation, which all the conversation's streams share: at most
// live.DefaultTailRecords records and live.DefaultTailBytes bytes per conversation followed, and
// live.DefaultTailTotalBytes for all of them (live.TailLimits). A session stream holds its queue,
// at most sessions.Config.SubQueue frames and SubQueueBytes bytes (past either its reader is cut
// off and resumes from its cursor); its session's frame log is bounded by
// sessions.Config.Limits.
//
//	m := gw.Memory()
//	fmt.Println(m.Streams, m.Live.QueuedBytes, m.Live.TailBytes, m.Sessions.QueuedBytes)
type Memory struct {
	// Streams are the streams open now, event streams and session streams together.
	Streams int
	// MaxQueueBytes is the most one event stream's live queue holds (Config.MaxPendingBytes).
	MaxQueueBytes int
	// Live is what the conversations' live channel and tails hold (live.Hub.Memory).
	Live live.Memory
	// Sessions is what the session streams hold (sessions.Service.Memory); zero without them.
	Sessions sessions.Memory
}

// Memory reports what the gateway's streams hold now.
//
// Concurrency: safe for concurrent use; the parts are read one after the other, so they may mix
// moments when the gateway is busy.
//
//	m := gw.Memory()
func (g *Gateway) Memory() Memory {
	g.mu.Lock()
	m := Memory{Streams: g.streams, MaxQueueBytes: g.cfg.MaxPendingBytes}
	g.mu.Unlock()
	m.Live = g.cv.Hub().Memory()
	if g.cfg.Sessions != nil {
		m.Sessions = g.cfg.Sessions.Memory()
	}
	return m
}
