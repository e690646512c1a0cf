package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// After a crash the parent checks, before adopting, that the child its log names still records
// it as parent: a child record changed in between is refused with a typed error.
func TestChildVerifiedOnReplay(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ops, _ := json.Marshal([]string{"child:c1:recv", "hold:gate"})
	_, err := w.k.Start(ctx, kernel.StartRequest{ID: "p", Flow: "script", Input: ops, Principal: alice})
	require.NoError(t, err)
	require.Equal(t, "hold gate", w.next("p"))
	child := kernel.ChildID("p", "c1")
	ref, ok, err := w.k.Parent(ctx, child)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, kernel.ParentRef{Parent: "p", Name: "c1"}, ref)
	w.crash()

	// Between the crash and the reopen, the child's parent record is rewritten.
	st, err := sqlite.Open(ctx, w.path, sqlite.Options{})
	require.NoError(t, err)
	b, _ := json.Marshal(kernel.ParentRef{Parent: "mallory", Name: "c1"})
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("parent/"+child, b) }))
	require.NoError(t, st.Close())

	w.open()
	require.Equal(t, "hold gate", w.next("p"))
	require.True(t, w.release("p", "gate"))
	in, err := w.k.Await(ctx, "p")
	require.NoError(t, err)
	var out []string
	require.NoError(t, json.Unmarshal(in.Output, &out))
	require.Equal(t, []string{"child:c1:recv = child-mismatch", `hold:gate = "released"`}, out)
}

// AwaitEnd refuses, with typed errors and nothing journaled, an unknown execution and one that
// is open but not running here.
func TestAwaitEndRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	// An execution of a flow this kernel does not run: recorded open, never launched.
	require.NoError(t, w.st.Update(ctx, func(tx store.Tx) error {
		b, _ := json.Marshal(kernel.Info{ID: "ghost", Flow: "gone", State: kernel.StateOpen})
		return tx.PutMeta(kernel.InfoKey("ghost"), b)
	}))
	for _, c := range []struct{ target, want string }{{"nobody", "not-found"}, {"ghost", "not-running"}} {
		ops, _ := json.Marshal([]string{"awaitend:" + c.target})
		id := "w-" + c.target
		_, err := w.k.Start(ctx, kernel.StartRequest{ID: id, Flow: "script", Input: ops, Principal: alice})
		require.NoError(t, err)
		in, err := w.k.Await(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, `["awaitend:`+c.target+` = `+c.want+`"]`, string(in.Output))
		require.Equal(t, []string{"0.1 started flow=script", "0.2 completed output=" + string(in.Output)}, w.journal(id))
	}
}

// AwaitEnd of an execution that ends between AwaitEnd's look at it and its wake (the end
// recorded, the execution gone from the running set) returns that end, journaled; it is not
// "open but not running".
func TestAwaitEndOfOneThatEndsMeanwhile(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ops, _ := json.Marshal([]string{"recv"})
	_, err := w.k.Start(ctx, kernel.StartRequest{ID: "b", Flow: "script", Input: ops, Principal: alice})
	require.NoError(t, err)
	require.Equal(t, "receive", w.next("b"))
	looked := 0
	var sendErr error
	kernel.SetEndLookHook(w.k, func(id string) { // on a's goroutine
		looked++
		if looked > 1 {
			return
		}
		_, sendErr = w.k.Send(ctx, "b", alice, "m1", json.RawMessage(`"hi"`))
		deadline := time.Now().Add(5 * time.Second)
		for kernel.Running(w.k, "b") && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	})
	ops, _ = json.Marshal([]string{"awaitend:b"})
	_, err = w.k.Start(ctx, kernel.StartRequest{ID: "a", Flow: "script", Input: ops, Principal: alice})
	require.NoError(t, err)
	in, err := w.k.Await(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, sendErr)
	want := `["awaitend:b = state=completed output=[recv = m1 \"hi\"]"]`
	require.JSONEq(t, want, string(in.Output))
	require.Equal(t, 1, looked, "b was found open once, then ended")
	require.Equal(t, []string{"0.1 started flow=script", `0.2 end.observed id=b state=completed`,
		"0.3 completed output=" + string(in.Output)}, w.journal("a"))
}

// Signal refuses bad names, empty keys and payloads that are not JSON, with ErrBadSignal.
func TestSignalRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ops, _ := json.Marshal([]string{"signal:s"})
	_, err := w.k.Start(ctx, kernel.StartRequest{ID: "p", Flow: "script", Input: ops, Principal: alice})
	require.NoError(t, err)
	for _, c := range []struct{ name, key, payload string }{
		{"", "k", ""}, {"a\x00b", "k", ""}, {strings.Repeat("n", 257), "k", ""}, {"s", "", ""}, {"s", "k", "{not json"},
	} {
		_, err := w.k.Signal(ctx, "p", c.name, c.key, json.RawMessage(c.payload))
		require.ErrorIs(t, err, kernel.ErrBadSignal, "%q %q %q", c.name, c.key, c.payload)
	}
	ok, err := w.k.Signal(ctx, "p", "s", "k", nil)
	require.NoError(t, err)
	require.True(t, ok)
	in, err := w.k.Await(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, in.State)
}

// A cancel cancels the context deciders and steps do their live I/O with, and a decider that
// fails meanwhile ends in the cancel, journaled at its frame.
func TestCancelCancelsCtx(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	got := make(chan error, 1)
	running := make(chan struct{})
	k := w.k
	k.Close()
	w.st.Close()
	st, err := sqlite.Open(ctx, w.path, sqlite.Options{})
	require.NoError(t, err)
	k, err = kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"f": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := c.Decide("wait", func() (json.RawMessage, error) {
			close(running)
			<-c.Ctx().Done()
			return nil, c.Ctx().Err()
		})
		got <- err
		return nil, err
	}}})
	require.NoError(t, err)
	w.st, w.k = st, k
	_, err = k.Start(ctx, kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-running
	require.NoError(t, k.Cancel(ctx, "x", "r"))
	select {
	case err := <-got:
		// The decider failed because of the cancel: Decide answers the cancel, not its error.
		require.ErrorIs(t, err, kernel.ErrCanceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the decider's context was not cancelled")
	}
	in, err := k.Await(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCanceled, in.State)
	require.Equal(t, "r", in.Error)
}

// The named signal can carry what the shared-mode turns pass today through a process-wide map:
// an agent.Signal whose probe and watch are the turn execution's named signal, delivered by
// another execution (the conversation) with Kernel.Signal. Its checkpoints are recorded
// decisions, as the agent loop's are.
func TestNamedSignalCarriesABargeIn(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	armed := make(chan struct{})
	past1 := make(chan struct{}) // the first checkpoint has looked, so the signal lands between the two
	turn := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		sig := agent.NewSignal(func(s *agent.Signal) {
			ch, stop := c.WatchSignal("barge-in")
			s.OnDisarm(stop)
			s.SetProbe(func() bool { _, ok, _ := c.PendingSignal("barge-in"); return ok })
			close(armed)
			go func() {
				select {
				case <-ch:
					s.Fire()
				case <-c.Ctx().Done():
				}
			}()
		})
		defer sig.Disarm()
		check := func(id string) (bool, error) {
			raw, err := c.Decide(id, func() (json.RawMessage, error) {
				sig.Arm()
				return json.Marshal(sig.Check())
			})
			var b bool
			_ = json.Unmarshal(raw, &b)
			return b, err
		}
		if fired, err := check("abort:1"); err != nil || fired {
			return json.Marshal("interrupted at 1")
		}
		close(past1)
		select {
		case <-sig.Done():
		case <-time.After(5 * time.Second):
		}
		fired, err := check("abort:2")
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[bool]string{true: "interrupted at 2", false: "not interrupted"}[fired])
	}
	w.k.Close()
	w.st.Close()
	st, err := sqlite.Open(ctx, w.path, sqlite.Options{})
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"turn": turn}})
	require.NoError(t, err)
	w.st, w.k = st, k
	_, err = k.Start(ctx, kernel.StartRequest{ID: "turn-1", Flow: "turn", Principal: alice})
	require.NoError(t, err)
	<-armed
	<-past1
	ok, err := k.Signal(ctx, "turn-1", "barge-in", "m-7", nil)
	require.NoError(t, err)
	require.True(t, ok)
	in, err := k.Await(ctx, "turn-1")
	require.NoError(t, err)
	require.JSONEq(t, `"interrupted at 2"`, string(in.Output))
}

// ChildID is deterministic, a valid execution id for every valid parent id and name, and tells
// apart different (parent, name) pairs, also those whose concatenations are equal.
func FuzzChildID(f *testing.F) {
	f.Add("p", "c1", "p/c", "1")
	f.Add(strings.Repeat("é", 128), strings.Repeat("x", 100), "a", "b")
	f.Fuzz(func(t *testing.T, p1, n1, p2, n2 string) {
		valid := func(s string) bool {
			return s != "" && utf8.ValidString(s) && len(s) <= 256 && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
		}
		if !valid(p1) || !valid(n1) {
			t.Skip()
		}
		id := kernel.ChildID(p1, n1)
		require.Equal(t, id, kernel.ChildID(p1, n1))
		require.True(t, valid(id), "%q", id)
		if (p1 != p2 || n1 != n2) && valid(p2) && valid(n2) {
			require.NotEqual(t, id, kernel.ChildID(p2, n2))
		}
	})
}
