package stream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/schemas"
)

// A conversation-events transcript (testdata/events/*.txt, read by reference/internal/transcript)
// drives a stream.ConvAdapter as a conversation's event stream does, each command followed by
// the events it sends, one a line: the event's name, its id when it has one, and its data as the
// data line holds it (a keep-alive is the comment it is).
//
//	begin who=KEY mode=owner|shared [from=G.S]        a new adapter for reader KEY, and its status
//	record ord= turn= role= status= cursor= [text=] [actor=] [reason=]
//	                                                  a durable record, as its reader may see it
//	read next=G.S                                     a read of the records ended at next
//	cursor                                            where the stream stands
//	partial turn= text= asker= [rerun]                the reply in progress when the stream attached
//	queue kind=delta|reset|done|tool turn= asker= [text=]
//	                                                  a live event waiting in the stream's queue
//	drain                                             the queue taken: which records go first, then its events
//	holds role= turn=                                 whether the last drain holds that record back
//	beat                                              the keep-alive
//	end reason=ENDING [errorId=]                      what the reader is told when the stream ends
//
// The data of every event must match schemas/sse-<name>.schema.json.
// `go test -run ConvTranscripts -rewrite` writes what the code gives instead of checking it.
func TestConvTranscripts(t *testing.T) {
	transcript.Files(t, filepath.Join("testdata", "events", "*.txt"), func(t *testing.T) func(string) string {
		r := &convRunner{}
		return func(command string) string { return r.run(t, command) }
	})
}

type convRunner struct {
	a     *stream.ConvAdapter
	queue []live.Event
	held  func(loomtype.Entry) bool
}

func (r *convRunner) run(t *testing.T, line string) string {
	cmd, a, err := transcript.Fields(line)
	if err != nil {
		t.Fatal(err)
	}
	if cmd != "begin" && r.a == nil {
		t.Fatalf("%s: begin first", line)
	}
	switch cmd {
	case "begin":
		var from loomtype.Cursor
		if f, ok := a["from"]; ok {
			if from, err = loomtype.ParseCursor(f); err != nil {
				t.Fatal(err)
			}
		}
		r.a, r.queue, r.held = stream.NewConvAdapter(a["who"], from), nil, nil
		owner := loomtype.Identity{Tenant: "acme", Actor: "alice"}
		return showConv(t, r.a.Begin(loomtype.Status{ID: "c1", Mode: loomtype.Mode(a["mode"]), State: loomtype.StateOpen, Owner: owner}))
	case "record":
		e := convEntry(a)
		evs, err := r.a.Record(e, e)
		if err != nil {
			return "error: " + err.Error()
		}
		return showConv(t, evs)
	case "read":
		next, err := loomtype.ParseCursor(a["next"])
		if err != nil {
			t.Fatal(err)
		}
		r.a.ReadTo(next)
		return "cursor=" + r.a.Cursor().String()
	case "cursor":
		return fmt.Sprintf("cursor=%s closed=%t", r.a.Cursor(), r.a.Closed())
	case "partial":
		_, rerun := a["rerun"]
		return showConv(t, r.a.Partial(live.Reply{Turn: num(a["turn"]), Text: a["text"], Asker: a["asker"], Rerun: rerun}))
	case "queue":
		r.queue = append(r.queue, liveEvent(t, a))
		return fmt.Sprintf("queued %d", len(r.queue))
	case "drain":
		return r.drain(t)
	case "holds":
		if r.held == nil {
			return "sent (nothing held back)"
		}
		if r.held(loomtype.Entry{Role: loomtype.Role(a["role"]), Turn: num(a["turn"])}) {
			return "held back"
		}
		return "sent"
	case "beat":
		return showConv(t, r.a.Beat())
	case "end":
		return showConv(t, r.a.End(ending(t, a["reason"]), a["errorId"]))
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func (r *convRunner) drain(t *testing.T) string {
	evs := r.queue
	r.queue = nil
	r.held = r.a.HoldBack(evs)
	first := "records first: all"
	if r.held != nil {
		for turn := int64(1); turn < 1<<20; turn++ {
			if r.held(loomtype.Entry{Role: loomtype.RoleAssistant, Turn: turn}) {
				first = fmt.Sprintf("records first: up to the reply of turn %d", turn)
				break
			}
		}
	}
	return first + "\n" + showConv(t, r.a.Live(evs))
}

func convEntry(a map[string]string) loomtype.Entry {
	e := loomtype.Entry{Ord: num(a["ord"]), Turn: num(a["turn"]), Role: loomtype.Role(a["role"]),
		Status: loomtype.RecordStatus(a["status"]), Reason: loomtype.Reason(a["reason"]), Cursor: a["cursor"]}
	if v, ok := a["text"]; ok {
		e.Text = &v
	}
	if a["actor"] != "" {
		e.Asker = &loomtype.Identity{Tenant: "acme", Actor: a["actor"]}
	}
	return e
}

func liveEvent(t *testing.T, a map[string]string) live.Event {
	ev := live.Event{Turn: num(a["turn"]), Text: a["text"], Asker: a["asker"]}
	for _, k := range []live.EventKind{live.KindDelta, live.KindReset, live.KindDone, live.KindTool} {
		if k.String() == a["kind"] {
			ev.Kind = k
		}
	}
	switch ev.Kind {
	case 0:
		t.Fatalf("no live event kind %q", a["kind"])
	case live.KindTool:
		ev.Tool = &live.Tool{Call: "k1", Name: "ls"}
	}
	return ev
}

func ending(t *testing.T, name string) stream.Ending {
	for e := stream.EndNone; e <= stream.EndFailed; e++ {
		if e.String() == name {
			return e
		}
	}
	t.Fatalf("no ending %q", name)
	return 0
}

// showConv prints events one a line, after checking each one's data against its schema.
func showConv(t *testing.T, evs []stream.ConvEvent) string {
	t.Helper()
	if len(evs) == 0 {
		return "(no event)"
	}
	var b []string
	for _, ev := range evs {
		if ev.Kind == stream.ConvKeepAlive {
			b = append(b, ": keep-alive")
			continue
		}
		data, err := json.Marshal(ev.Data())
		if err != nil {
			t.Fatal(err)
		}
		var verr *schemas.ValidationError
		if err := schemas.Validate("sse-"+ev.Kind.String(), data); errors.As(err, &verr) {
			t.Errorf("%s event does not match its schema: %v", ev.Kind, err)
		} else if err != nil {
			t.Fatal(err)
		}
		s := ev.Kind.String()
		if ev.ID != "" {
			s += " id=" + ev.ID
		}
		b = append(b, s+" "+string(data))
	}
	return strings.Join(b, "\n")
}
