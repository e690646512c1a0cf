package sessions

import "github.com/loomcheck/loomcheck/reference/internal/stream"

// Memory is what a Service holds in memory, in counts and bytes, for reporting. Every figure is
// bounded: the resident sessions by Config.ResidentBytes over Limits.MaxBytes (512 by default, at
// most 4096) and one caller's by its share (Config.PrincipalResidentBytes), each session's frame
// log by Config.Limits (4096 frames and 4 MiB of encoded frames by default), its subscribers by Config.MaxSubscribers, each
// subscriber's queue by Config.SubQueue frames and Config.SubQueueBytes bytes, and the tickets
// by Config.MaxTickets (one caller's by Config.PrincipalTickets). The conversation tail a resident session reads is the conversation
// layer's (live.Hub.Memory reports it).
//
//	m := svc.Memory()
//	fmt.Println(m.Sessions, m.Frames, m.QueuedBytes)
type Memory struct {
	// Sessions are the resident sessions: each keeps its frame log and runs a pump.
	Sessions int
	// Frames are the frames their logs hold; FrameBytes estimates them (each frame's data and
	// strings, and 96 bytes for the rest of its encoding).
	Frames, FrameBytes int
	// Subscribers are the readers; QueuedFrames and QueuedBytes what their queues hold (bytes
	// as Config.SubQueueBytes counts them), MaxQueuedBytes the most one of them holds.
	Subscribers, QueuedFrames, QueuedBytes, MaxQueuedBytes int
	// Tickets are the tickets kept (waiting, or spent and not yet swept).
	Tickets int
}

// Memory reports what the service holds now.
//
// Concurrency: safe for concurrent use; each session is read under its own lock, so the
// figures may mix moments when the service is busy.
//
//	m := svc.Memory()
//	fmt.Println(m.Sessions, m.Subscribers, m.QueuedBytes)
func (s *Service) Memory() Memory {
	s.mu.Lock()
	m := Memory{Sessions: len(s.sessions), Tickets: len(s.tickets)}
	resident := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		resident = append(resident, ss)
	}
	s.mu.Unlock()
	for _, ss := range resident {
		ss.mu.Lock()
		for _, f := range ss.log.Frames() {
			m.Frames++
			m.FrameBytes += frameEstimate(f)
		}
		for sub := range ss.subs {
			sub.settle()
			m.Subscribers++
			m.QueuedFrames += len(sub.sizes)
			m.QueuedBytes += sub.queued
			m.MaxQueuedBytes = max(m.MaxQueuedBytes, sub.queued)
		}
		ss.mu.Unlock()
	}
	return m
}

// frameEstimate is f's size as Memory estimates it.
func frameEstimate(f stream.Frame) int {
	return 96 + len(f.ID) + len(f.Session) + len(f.Type) + len(f.Time) + len(f.Corr) + len(f.Author) +
		len(f.ActsFor) + len(f.Message) + len(f.Rid) + len(f.Data)
}
