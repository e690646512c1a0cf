package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// A crash scenario starts executions of the script flow and reacts to where they wait, with
// inputs that are safe to give again (a start, a message or signal with its key, a cancel, a
// release, the clock set to an absolute time), as a client retrying after a crash would.
type crashScenario struct {
	name   string
	starts [][2]string // id, ops separated by ";"
	react  func(w *world, id, site string)
	ids    []string // the executions whose outcome is compared
}

var crashScenarios = []crashScenario{
	{
		name:   "cancel a step in flight",
		starts: [][2]string{{"p", "step:a;hold:b;step:c"}},
		react: func(w *world, id, site string) {
			if site == "hold b" {
				_ = w.kern().Cancel(context.Background(), "p", "stop")
			}
		},
		ids: []string{"p"},
	},
	{
		name:   "cancel a decider in flight",
		starts: [][2]string{{"p", "decide:a;holddecide:b;step:c"}},
		react: func(w *world, id, site string) {
			if site == "hold b" {
				_ = w.kern().Cancel(context.Background(), "p", "stop")
			}
		},
		ids: []string{"p"},
	},
	{
		name:   "cancel a wait",
		starts: [][2]string{{"p", "step:a;recv;step:b"}},
		react: func(w *world, id, site string) {
			if site == "receive" {
				_ = w.kern().Cancel(context.Background(), "p", "stop")
			}
		},
		ids: []string{"p"},
	},
	{
		name:   "child",
		starts: [][2]string{{"p", "child:c1:step:w,recv;await:c1;decide:after"}},
		react: func(w *world, id, site string) {
			if id == kernel.ChildID("p", "c1") && site == "receive" {
				_, _ = w.kern().Send(context.Background(), id, alice, "m1", json.RawMessage(`"hi"`))
			}
		},
		ids: []string{"p", "p/c1"},
	},
	{
		name:   "send",
		starts: [][2]string{{"b", "recv;recv;decide:b"}, {"a", "sendto:b:m1:hi;sendto:b:m2:bye;awaitend:b;decide:x"}},
		ids:    []string{"a", "b"},
	},
	{
		name:   "signal",
		starts: [][2]string{{"p", "signal:s;rotate;signal:s;decide:d"}},
		react: func(w *world, id, site string) {
			if site == "signal s" {
				_, _ = w.kern().Signal(context.Background(), "p", "s", "k1", json.RawMessage(`1`))
				_, _ = w.kern().Signal(context.Background(), "p", "s", "k2", json.RawMessage(`2`))
			}
		},
		ids: []string{"p"},
	},
	{
		name:   "timer",
		starts: [][2]string{{"p", "step:a;sleep:t:10m;decide:d"}},
		react: func(w *world, id, site string) {
			if site == "timer t" {
				w.clock.Set(t0.Add(time.Hour))
			}
		},
		ids: []string{"p"},
	},
	{
		name:   "safe point",
		starts: [][2]string{{"p", "hold:tool;safepoint:sp;recv"}},
		react: func(w *world, id, site string) {
			switch site {
			case "hold tool":
				_, _ = w.kern().Send(context.Background(), "p", alice, "s1", json.RawMessage(`"steer"`))
				w.release("p", "tool")
			case "receive":
				_, _ = w.kern().Send(context.Background(), "p", alice, "m2", json.RawMessage(`"last"`))
			}
		},
		ids: []string{"p"},
	},
}

func (sc crashScenario) startAll(w *world) {
	for _, s := range sc.starts {
		ops, _ := json.Marshal(strings.Split(s[1], ";"))
		_, _ = w.kern().Start(context.Background(), kernel.StartRequest{ID: s[0], Flow: "script", Input: ops, Principal: alice})
	}
}

// run runs the scenario, crashing after the crashAt-th durable write when crashAt > 0 and then
// reopening, and returns the outcome (each execution's end and whole journal) and the number of
// writes the run made.
func (sc crashScenario) run(t *testing.T, crashAt int64) ([]string, int64) {
	w := newWorld(t)
	w.react = sc.react
	if crashAt > 0 {
		crashed := w.st.CrashAfterWrite(crashAt)
		sc.startAll(w)
		done := make(chan struct{})
		k := w.kern()
		go func() {
			defer close(done)
			for _, id := range sc.ids {
				_, _ = k.Await(context.Background(), resolve(id))
			}
		}()
		select {
		case <-crashed:
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("crash at %d: neither the crash nor the end came", crashAt)
		}
		w.crash()
		<-done
		w.pending.Wait()
		w.open()
	}
	sc.startAll(w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	for _, id := range sc.ids {
		in, err := w.kern().Await(ctx, resolve(id))
		require.NoError(t, err, "crash at %d: %s did not end", crashAt, id)
		out = append(out, id+": "+infoLine(in))
		for _, l := range w.journal(resolve(id)) {
			// Whether a send was delivered by this run or found delivered by an earlier one
			// (a crash between the delivery and its journal) is not part of the outcome.
			out = append(out, "  "+strings.Replace(l, " delivered=true", "", 1))
		}
	}
	return out, w.st.Writes()
}

// Crash at each durable write of each primitive's scenario, reopen, and the outcome is the same:
// the same end and the same journal, command for command.
func TestPrimitivesCrashAtEveryWrite(t *testing.T) {
	for _, sc := range crashScenarios {
		t.Run(sc.name, func(t *testing.T) {
			want, writes := sc.run(t, 0)
			require.Greater(t, writes, int64(2))
			for _, l := range want {
				require.NotContains(t, l, "state=open", "the baseline must end")
			}
			for n := int64(1); n <= writes; n++ {
				got, _ := sc.run(t, n)
				require.Equal(t, want, got, "crash after write %d of %d", n, writes)
			}
			t.Logf("%s: %d crash points, outcome:\n%s", sc.name, writes, strings.Join(want, "\n"))
		})
	}
}
