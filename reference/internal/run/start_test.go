package run_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

func openRuns(t *testing.T) *run.Runs {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rs := run.New(run.Deps{Provider: scriptmodel.Echo("re: ")})
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return rs
}

// A refused start reports no run created, names the option, and leaves no run behind.
func TestARefusedStartCreatesNothing(t *testing.T) {
	rs := openRuns(t)
	ctx := context.Background()
	_, created, err := rs.Start(ctx, alice, run.Options{ID: "r1"})
	var bad *loomtype.BadRequestError
	if !errors.As(err, &bad) || bad.Field != "prompt" {
		t.Fatalf("start without a prompt: %v, want a bad request naming prompt", err)
	}
	if created {
		t.Fatal("a refused start reports a run created")
	}
	v, created, err := rs.Start(ctx, alice, run.Options{ID: "r1", Prompt: "check"})
	if err != nil || !created {
		t.Fatalf("the same id after the refusal: created %v, %v; want a new run", created, err)
	}
	if _, err := rs.Get(ctx, alice, v.ID); err != nil {
		t.Fatal(err)
	}
}

// A run started without an id gets one of the system's: "run:" and 24 hex digits, new each time.
func TestSystemMadeRunIDs(t *testing.T) {
	rs := openRuns(t)
	ctx := context.Background()
	shape := regexp.MustCompile(`^run:[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 3 {
		v, created, err := rs.Start(ctx, alice, run.Options{Prompt: "check"})
		if err != nil || !created {
			t.Fatalf("start: created %v, %v", created, err)
		}
		if !shape.MatchString(v.ID) || seen[v.ID] {
			t.Fatalf("system-made id %q: want run: and 24 hex digits, unlike %v", v.ID, seen)
		}
		seen[v.ID] = true
	}
}

// Abort and cancel of someone else's run (any identity field differing) are ErrNotFound, as for
// a run that does not exist, and change nothing.
func TestAbortAndCancelOfSomeoneElsesRunAreNotFound(t *testing.T) {
	rs := openRuns(t)
	ctx := context.Background()
	v, _, err := rs.Start(ctx, alice, run.Options{ID: "mine", Prompt: "check"})
	if err != nil {
		t.Fatal(err)
	}
	others := []loomtype.Identity{
		{Tenant: "evil", Actor: "alice"},
		{Tenant: "acme", Actor: "mallory"},
		{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"},
		{Actor: "alice"},
	}
	for _, who := range others {
		if err := rs.Abort(ctx, who, v.ID); !errors.Is(err, run.ErrNotFound) {
			t.Errorf("abort by %+v: %v, want ErrNotFound", who, err)
		}
		if err := rs.Cancel(ctx, who, v.ID); !errors.Is(err, run.ErrNotFound) {
			t.Errorf("cancel by %+v: %v, want ErrNotFound", who, err)
		}
	}
	if err := rs.Abort(ctx, alice, "run:nosuch"); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("abort of a run that does not exist: %v, want ErrNotFound", err)
	}
}

// The run client checks its own timeouts by name, whatever a gateway checked before it.
func TestTimeoutsOutOfRangeAreRefusedByName(t *testing.T) {
	rs := openRuns(t)
	ctx := context.Background()
	for _, c := range []struct {
		opt   run.Options
		field string
	}{
		{run.Options{Prompt: "p", TurnTimeoutMs: -1}, "turnTimeoutMs"},
		{run.Options{Prompt: "p", TurnTimeoutMs: run.MaxTimeoutMs + 1}, "turnTimeoutMs"},
		{run.Options{Prompt: "p", ToolTimeoutMs: -1}, "toolTimeoutMs"},
		{run.Options{Prompt: "p", ToolTimeoutMs: run.MaxTimeoutMs + 1}, "toolTimeoutMs"},
	} {
		_, created, err := rs.Start(ctx, alice, c.opt)
		var bad *loomtype.BadRequestError
		if !errors.As(err, &bad) || bad.Field != c.field || created {
			t.Errorf("start with %+v: created %v, %v; want a bad request naming %s", c.opt, created, err, c.field)
		}
	}
	if _, _, err := rs.Start(ctx, alice, run.Options{Prompt: "p", TurnTimeoutMs: run.MaxTimeoutMs, ToolTimeoutMs: run.MaxTimeoutMs}); err != nil {
		t.Fatalf("timeouts at the maximum: %v", err)
	}
}

// Answering a gate or a human call of someone else's run is ErrNotFound, as for no run at all.
func TestAnswersToSomeoneElsesRunAreNotFound(t *testing.T) {
	rs := openRuns(t)
	ctx := context.Background()
	v, _, err := rs.Start(ctx, alice, run.Options{ID: "mine", Prompt: "check"})
	if err != nil {
		t.Fatal(err)
	}
	mallory := loomtype.Identity{Tenant: "acme", Actor: "mallory"}
	if _, err := rs.Approve(ctx, mallory, v.ID, "t1-c0", true); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("approve by another identity: %v, want ErrNotFound", err)
	}
	if _, err := rs.AnswerHuman(ctx, mallory, v.ID, "t1-c0", []byte(`{"ok":true}`)); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("human answer by another identity: %v, want ErrNotFound", err)
	}
}
