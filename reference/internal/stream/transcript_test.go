package stream_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A transcript (reference/internal/transcript) drives an adapter and a log with conversation
// events and replays, each command followed by the exact output it must give.
//
// Commands: limits frames=N bytes=N (a new, empty log), every adapter event by its kind
// (record, delta, restart, queued, picked-up, unqueued, stopping, tool-started, tool-finished,
// private) printing the frames it logged, replay from=N, and state. Beyond the adapter:
//
//	append kind=K [turn= message= author= data=JSON]   log a spec of any kind as it is; with
//	  unchecked=true the frame need not match the schema, and the output says when it does not
//	ephemeral kind=K [author= data=JSON]                an ephemeral frame (never logged)
//	block [tool=] result=JSON [people=N]                the block of a tool's result
//	render cur=N [viewer=ID] [roles=a,b]                logged frame N as that viewer receives it
//	asker cur=N [roles=a,b]                             whether an asker with those roles can read it
//	expire cur=N now=+D [retain=D]                      frame N under retention at t0+D (retain 24h)
//	expire-replay from=N now=+D [retain=D]              a replay, each frame under retention
//	logged cur=N                                        what the durable record keeps of a user-message
//	validate data=JSON                                  ValidateUserMessage of user-message data
//
// Every frame a command prints must also match schemas/stream-frame.schema.json, and every block
// schemas/stream-block.schema.json.
// `go test -run Transcripts -rewrite` writes what the code gives instead of checking it.
func TestTranscripts(t *testing.T) {
	transcript.Files(t, filepath.Join("testdata", "transcripts", "*.txt"), func(t *testing.T) func(string) string {
		r := &runner{t: t, a: stream.NewAdapter(), l: stream.NewLog("c1", stream.Limits{}), byCur: map[int64]stream.Frame{}}
		return func(command string) string { return r.run(t, command) }
	})
}

type runner struct {
	t     *testing.T
	a     *stream.Adapter
	l     *stream.Log
	n     int
	byCur map[int64]stream.Frame
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func num(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func (r *runner) run(t *testing.T, line string) string {
	cmd, a, err := transcript.Fields(line)
	if err != nil {
		t.Fatal(err)
	}
	switch cmd {
	case "limits":
		r.a, r.l = stream.NewAdapter(), stream.NewLog("c1", stream.Limits{MaxFrames: int(num(a["frames"])), MaxBytes: int(num(a["bytes"]))})
		r.byCur = map[int64]stream.Frame{}
		return "ok"
	case "append", "ephemeral", "block", "render", "asker", "expire", "expire-replay", "logged", "validate":
		return r.pure(t, cmd, a)
	case "state":
		return fmt.Sprintf("head=%d floor=%d", r.l.Head(), r.l.Floor())
	case "replay":
		frames, reset := r.l.Replay(num(a["from"]))
		if reset {
			return fmt.Sprintf("reset floor=%d head=%d", r.l.Floor(), r.l.Head())
		}
		if len(frames) == 0 {
			return "(none)"
		}
		return r.show(frames)
	}
	ev := stream.Event{Kind: stream.EventKind(cmd), Turn: num(a["turn"]), Text: a["text"], Message: a["message"],
		Author: a["author"], Call: a["call"], Tool: a["tool"], OK: a["ok"] == "true", People: int(num(a["people"])),
		State: a["state"]}
	if v, ok := a["result"]; ok {
		ev.Result = []byte(v)
	}
	if cmd == "private" {
		ev.Enc = &stream.Enc{Alg: a["alg"], Kid: a["kid"], CT: a["ct"]}
	}
	if cmd == "record" {
		e := loomtype.Entry{Ord: num(a["ord"]), Turn: num(a["turn"]), Role: loomtype.Role(a["role"]),
			Status: loomtype.RecordStatus(a["status"]), Reason: loomtype.Reason(a["reason"]), MessageID: a["id"],
			Cursor: a["cursor"]}
		if v, ok := a["text"]; ok {
			e.Text = &v
		}
		if a["actor"] != "" {
			e.Asker = &loomtype.Identity{Tenant: "acme", Actor: a["actor"]}
		}
		ev.Entry = &e
	}
	var out []stream.Frame
	for _, spec := range r.a.Apply(ev) {
		r.n++
		f, err := r.l.Append(spec, t0.Add(time.Duration(r.n)*time.Millisecond))
		if err != nil {
			return "error: " + err.Error()
		}
		r.byCur[f.Cur] = f
		out = append(out, f)
	}
	if len(out) == 0 {
		return "(no frame)"
	}
	return r.show(out)
}

// show prints frames one a line, after checking each against the frame schema.
func (r *runner) show(frames []stream.Frame) string {
	for _, f := range frames {
		checkSchema(r.t, f)
	}
	return show(frames)
}

func show(frames []stream.Frame) string {
	var b []string
	for _, f := range frames {
		s := strconv.FormatInt(f.Cur, 10)
		if f.Span > 1 {
			s = fmt.Sprintf("%d-%d", f.First(), f.Cur)
		}
		s += " " + string(f.Kind())
		if f.Turn != 0 {
			s += fmt.Sprintf(" turn=%d", f.Turn)
		}
		for _, kv := range [][2]string{{"msg", f.Message}, {"author", f.Author}, {"corr", f.Corr}} {
			if kv[1] != "" {
				s += " " + kv[0] + "=" + kv[1]
			}
		}
		if f.Expired {
			s += " expired"
		}
		b = append(b, s+" "+string(f.Data))
	}
	return strings.Join(b, "\n")
}
