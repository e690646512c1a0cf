package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A transcript (reference/internal/transcript) is a script of inputs to a kernel running the
// script flow, each followed by the exact output it must give. The commands are those of
// (*transcriptRunner).run. `go test -run Transcripts -rewrite` writes the outputs the kernel gives
// instead of checking them.
func TestTranscripts(t *testing.T) {
	transcript.Files(t, filepath.Join("testdata", "transcripts", "*.txt"), func(t *testing.T) func(string) string {
		r := &transcriptRunner{w: newWorld(t)}
		return func(command string) string { return r.run(t, command) }
	})
}

type transcriptRunner struct{ w *world }

// run runs one command and returns its output. Commands:
//
//	start id=ID script=OP;OP;... [as=ACTOR] [flow=NAME]   start an execution of the script flow
//	send id=ID msg=MSGID text=TEXT                         deliver a message to its inbox
//	signal id=ID name=NAME key=KEY [payload=JSON]          deliver a named signal
//	cancel id=ID reason=REASON                             cancel it
//	release id=ID step=NAME                                let a held step finish
//	advance by=DURATION [id=ID]                            move the clock
//	wait id=ID                                             where it waits next (or its end)
//	arm writes=N                                           the store dies after its N-th write from now
//	crash                                                  kill the store (once the armed point is reached) and the kernel
//	reopen [wait=ID,ID] [rename=OP>OP]                     open again (optionally change the flow)
//	journal id=ID  effects id=ID  info id=ID  inbox id=ID  what is recorded and what happened
//
// A command that acts on execution ID then prints where it waits next, unless given nowait.
func (r *transcriptRunner) run(t *testing.T, line string) string {
	w := r.w
	ctx := context.Background()
	cmd, a, err := transcript.Fields(line)
	if err != nil {
		t.Fatal(err)
	}
	id := resolve(a["id"])
	var out []string
	say := func(f string, v ...any) { out = append(out, fmt.Sprintf(f, v...)) }
	follow := func() {
		if _, ok := a["nowait"]; !ok && id != "" {
			say("%s: %s", display(id), w.next(id))
		}
	}
	switch cmd {
	case "start":
		w.mu.Lock()
		w.rename = map[string]string{} // a rename is for the reopen that asked for it
		w.mu.Unlock()
		ops, _ := json.Marshal(strings.Split(a["script"], ";"))
		p := alice
		if as := a["as"]; as != "" {
			p = loomtype.Identity{Tenant: "acme", Actor: as}
		}
		flow := a["flow"]
		if flow == "" {
			flow = "script"
		}
		_, err := w.k.Start(ctx, kernel.StartRequest{ID: id, Flow: flow, Input: ops, Principal: p})
		say("%s", errName(err))
		follow()
	case "send":
		b, _ := json.Marshal(a["text"])
		ok, err := w.k.Send(ctx, id, alice, a["msg"], b)
		switch {
		case err != nil:
			say("%s", errName(err))
		case ok:
			say("delivered")
		default:
			say("duplicate")
		}
		follow()
	case "signal":
		var p json.RawMessage
		if v := a["payload"]; v != "" {
			p = json.RawMessage(v)
		}
		ok, err := w.k.Signal(ctx, id, a["name"], a["key"], p)
		switch {
		case err != nil:
			say("%s", errName(err))
		case ok:
			say("delivered")
		default:
			say("duplicate")
		}
		follow()
	case "cancel":
		say("%s", errName(w.k.Cancel(ctx, id, a["reason"])))
		follow()
	case "release":
		if !w.release(id, a["step"]) {
			say("no step %s held", a["step"])
		} else {
			say("released")
		}
		follow()
	case "advance":
		d, err := time.ParseDuration(a["by"])
		if err != nil {
			t.Fatalf("advance: %v", err)
		}
		w.clock.Set(w.clock.Now().Add(d))
		say("now=+%s", w.clock.Now().Sub(t0))
		follow()
	case "wait":
		say("%s: %s", display(id), w.next(id))
	case "arm":
		var n int64
		fmt.Sscan(a["writes"], &n)
		ch := w.st.CrashAfterWrite(n)
		w.mu.Lock()
		w.armed = ch
		w.mu.Unlock()
		say("armed: the store dies after write %d from now", n)
	case "crash":
		w.crash()
		say("crashed")
	case "reopen":
		w.mu.Lock()
		w.rename = map[string]string{}
		if rn := a["rename"]; rn != "" {
			from, to, _ := strings.Cut(rn, ">")
			w.rename[from] = to
		}
		w.mu.Unlock()
		w.open()
		say("reopened")
		if ws := a["wait"]; ws != "" {
			for _, x := range strings.Split(ws, ",") {
				say("%s: %s", x, w.next(resolve(x)))
			}
		}
	case "journal":
		out = append(out, w.journal(id)...)
	case "effects":
		e := w.takeEffects(id)
		if len(e) == 0 {
			say("(none)")
		}
		out = append(out, e...)
	case "info":
		in, err := w.k.Info(ctx, id)
		if err != nil {
			say("%s", errName(err))
			break
		}
		say("%s", infoLine(in))
	case "inbox":
		msgs, err := w.k.Backlog(ctx, id, 100)
		if err != nil {
			say("%s", errName(err))
		}
		for _, m := range msgs {
			say("%d %s from=%s %s", m.Seq, m.MessageID, display(m.Sender.String()), m.Payload)
		}
		if len(msgs) == 0 {
			say("(empty)")
		}
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	return strings.Join(out, "\n")
}
