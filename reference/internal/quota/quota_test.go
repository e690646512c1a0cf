package quota_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var (
	alice = loomtype.Identity{Tenant: "t", Actor: "alice"}
	bob   = loomtype.Identity{Tenant: "t", Actor: "bob"}
)

// kinds are the bounds counted in slots.
var kinds = []quota.Kind{quota.Streams, quota.Tickets, quota.Resident}

// openStore opens a SQLite store of the test's own.
func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// backends open, for each store, the handles two engines of one store write through: one SQLite
// store shared in the process; two handles (two nodes) on one PostgreSQL database of the test's
// own, when a server is configured (pgtest).
var backends = map[string]func(t *testing.T) (a, b store.Store){
	"sqlite": func(t *testing.T) (store.Store, store.Store) { st := openStore(t); return st, st },
	"postgres": func(t *testing.T) (store.Store, store.Store) {
		url := pgtest.TempDatabase(t)
		open := func() store.Store {
			st, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		return open(), open()
	},
}

// engine opens the shared counts as the engine of holder on st would: a kernel of its own on the
// store's global namespace.
func engine(t *testing.T, st store.Store, holder string) *quota.Shared {
	t.Helper()
	ctx := context.Background()
	g, err := store.Namespace(st, quota.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Open(ctx, g, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	q, err := quota.OpenShared(ctx, k, holder)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func slot(kind quota.Kind, who loomtype.Identity, i int) quota.Slot {
	return quota.Slot{Kind: kind, Who: who, ID: "s" + strconv.Itoa(i)}
}

// refusedAt checks err is the refusal of kind at max.
func refusedAt(t *testing.T, err error, kind quota.Kind, max int) {
	t.Helper()
	var r *quota.Refusal
	if !errors.As(err, &r) || r.Kind != kind || r.Max != max || !errors.Is(err, loomtype.ErrLimit) {
		t.Fatalf("admission past the bound: got %v, want the %s refusal at %d", err, kind, max)
	}
}

// TestTwoEnginesShareEachBound: two engines (two partitions' holders) on one store admit N slots
// of one principal between them, alternately, and both refuse the N+1th; another principal is
// admitted; a slot given back on one engine is taken on the other.
func TestTwoEnginesShareEachBound(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		for name, open := range backends {
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				sa, sb := open(t)
				a, b := engine(t, sa, "partition/0"), engine(t, sb, "partition/1")
				twoEngines(t, ctx, kind, a, b)
			})
		}
	}
}

// twoEngines is TestTwoEnginesShareEachBound on the engines a and b of one store.
func twoEngines(t *testing.T, ctx context.Context, kind quota.Kind, a, b *quota.Shared) {
	t.Helper()
	const n = 5
	for i := range n {
		if err := []*quota.Shared{a, b}[i%2].Admit(ctx, slot(kind, alice, i), n, 0); err != nil {
			t.Fatalf("slot %d of %d: %v", i+1, n, err)
		}
	}
	refusedAt(t, a.Admit(ctx, slot(kind, alice, n), n, 0), kind, n)
	refusedAt(t, b.Admit(ctx, slot(kind, alice, n), n, 0), kind, n)
	if err := a.Admit(ctx, slot(kind, alice, 0), n, 0); err != nil {
		t.Fatalf("a slot held already, taken again: %v", err)
	}
	if err := b.Admit(ctx, slot(kind, bob, 0), n, 0); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	if err := b.Release(ctx, slot(kind, alice, 0)); err != nil {
		t.Fatal(err)
	}
	if err := a.Admit(ctx, slot(kind, alice, n), n, 0); err != nil {
		t.Fatalf("after a release on the other engine: %v", err)
	}
	if got, err := b.Held(ctx, kind, alice, 0); err != nil || got != n {
		t.Fatalf("held = %d, %v; want %d", got, err, n)
	}
}

// TestRacingEnginesAdmitExactlyTheBound: two engines admitting one principal's slots at once
// admit exactly the bound between them.
func TestRacingEnginesAdmitExactlyTheBound(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			sa, sb := open(t)
			racing(t, engine(t, sa, "partition/0"), engine(t, sb, "partition/1"))
		})
	}
}

// racing is TestRacingEnginesAdmitExactlyTheBound on the engines of one store.
func racing(t *testing.T, engines ...*quota.Shared) {
	ctx := context.Background()
	const n, tries = 4, 12
	var mu sync.Mutex
	admitted, refused := 0, 0
	var wg sync.WaitGroup
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := engines[i%2].Admit(ctx, slot(quota.Streams, alice, i), n, 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case errors.Is(err, loomtype.ErrLimit):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if admitted != n || refused != tries-n {
		t.Fatalf("admitted %d, refused %d; want %d and %d", admitted, refused, n, tries-n)
	}
}

// TestADeadEnginesSlotsAreFreedByTheNextAdmission: the slots of an engine that stopped without
// giving them back count until its holder opens again (the partition taken over), and the next
// admission on any engine drops them.
func TestADeadEnginesSlotsAreFreedByTheNextAdmission(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		for name, open := range backends {
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				sa, sb := open(t)
				deadEngine(t, ctx, kind, sa, sb)
			})
		}
	}
}

// deadEngine is TestADeadEnginesSlotsAreFreedByTheNextAdmission on the handles sa and sb of one
// store: the dead engine and its successor write through sa.
func deadEngine(t *testing.T, ctx context.Context, kind quota.Kind, sa, sb store.Store) {
	t.Helper()
	st := sa
	dead, b := engine(t, st, "partition/0"), engine(t, sb, "partition/1")
	const n = 3
	for i := range n {
		if err := dead.Admit(ctx, slot(kind, alice, i), n, 0); err != nil {
			t.Fatal(err)
		}
	}
	refusedAt(t, b.Admit(ctx, slot(kind, alice, n), n, 0), kind, n)
	next := engine(t, sa, "partition/0") // the partition's next engine
	if next.Epoch() != dead.Epoch()+1 {
		t.Fatalf("epoch %d after %d", next.Epoch(), dead.Epoch())
	}
	for i := range n {
		if err := b.Admit(ctx, slot(kind, alice, n+i), n, 0); err != nil {
			t.Fatalf("slot %d after the takeover: %v", i+1, err)
		}
	}
	refusedAt(t, next.Admit(ctx, slot(kind, alice, 2*n), n, 0), kind, n)
}

// TestExpiredSlotsStopCounting: a slot counts until its expiry, and not at it.
func TestExpiredSlotsStopCounting(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for name, q := range map[string]quota.Counter{"shared": engine(t, st, "engine"), "memory": &quota.Memory{}} {
		t.Run(name, func(t *testing.T) {
			s := quota.Slot{Kind: quota.Tickets, Who: alice, ID: "t1", Expires: 1000}
			if err := q.Admit(ctx, s, 1, 999); err != nil {
				t.Fatal(err)
			}
			refusedAt(t, q.Admit(ctx, quota.Slot{Kind: quota.Tickets, Who: alice, ID: "t2"}, 1, 999), quota.Tickets, 1)
			if err := q.Admit(ctx, quota.Slot{Kind: quota.Tickets, Who: alice, ID: "t2"}, 1, 1000); err != nil {
				t.Fatalf("at the first slot's expiry: %v", err)
			}
		})
	}
}

// TestMemoryCountsTheBound: the in-memory counter admits N of each kind, refuses the N+1th, and
// takes one more after a release.
func TestMemoryCountsTheBound(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			var m quota.Memory
			const n = 3
			for i := range n {
				if err := m.Admit(ctx, slot(kind, alice, i), n, 0); err != nil {
					t.Fatal(err)
				}
			}
			refusedAt(t, m.Admit(ctx, slot(kind, alice, n), n, 0), kind, n)
			if err := m.Admit(ctx, slot(kind, bob, 0), n, 0); err != nil {
				t.Fatal(err)
			}
			if err := m.Release(ctx, slot(kind, alice, 1)); err != nil {
				t.Fatal(err)
			}
			if err := m.Admit(ctx, slot(kind, alice, n), n, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEachKindIsCountedApart: a principal that holds its whole bound of one kind is admitted a
// slot of every other kind, even under the same slot id, on both counters; releasing a slot of one
// kind gives back nothing of another.
func TestEachKindIsCountedApart(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for name, q := range map[string]quota.Counter{"shared": engine(t, st, "engine"), "memory": &quota.Memory{}} {
		t.Run(name, func(t *testing.T) {
			for _, kind := range kinds { // each full while the next is taken
				if err := q.Admit(ctx, slot(kind, alice, 0), 1, 0); err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
			}
			if err := q.Release(ctx, slot(quota.Streams, alice, 0)); err != nil {
				t.Fatal(err)
			}
			for _, kind := range kinds[1:] {
				refusedAt(t, q.Admit(ctx, slot(kind, alice, 1), 1, 0), kind, 1)
			}
			if err := q.Admit(ctx, slot(quota.Streams, alice, 1), 1, 0); err != nil {
				t.Fatalf("the released kind: %v", err)
			}
			for _, kind := range kinds {
				if n, err := q.Held(ctx, kind, alice, 0); err != nil || n != 1 {
					t.Fatalf("%s held: %d, %v; want 1", kind, n, err)
				}
			}
		})
	}
}

// TestTwoEnginesShareAPostAllowance: two engines on one store take one principal's POSTs from
// one allowance: perMinute at once between them, the next refused on both; another principal
// has its own; a second later one more token has come back (perMinute a minute).
func TestTwoEnginesShareAPostAllowance(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			sa, sb := open(t)
			postAllowance(t, engine(t, sa, "partition/0"), engine(t, sb, "partition/1"))
		})
	}
}

// postAllowance is TestTwoEnginesShareAPostAllowance on the engines a and b of one store.
func postAllowance(t *testing.T, a, b *quota.Shared) {
	ctx := context.Background()
	const perMinute = 6
	const t0 = int64(1_000_000)
	for i := range perMinute {
		if err := []*quota.Shared{a, b}[i%2].Take(ctx, alice, perMinute, t0); err != nil {
			t.Fatalf("post %d of %d: %v", i+1, perMinute, err)
		}
	}
	refusedAt(t, a.Take(ctx, alice, perMinute, t0), quota.Posts, perMinute)
	refusedAt(t, b.Take(ctx, alice, perMinute, t0), quota.Posts, perMinute)
	if err := b.Take(ctx, bob, perMinute, t0); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	// One token comes back every 60 000 / perMinute ms: not a millisecond before.
	back := t0 + 60_000/perMinute
	refusedAt(t, a.Take(ctx, alice, perMinute, back-1), quota.Posts, perMinute)
	if err := b.Take(ctx, alice, perMinute, back); err != nil {
		t.Fatalf("a token later: %v", err)
	}
	refusedAt(t, a.Take(ctx, alice, perMinute, back), quota.Posts, perMinute)
}

// TestMemoryPostAllowance: the in-memory allowance admits perMinute at once and refuses the next.
func TestMemoryPostAllowance(t *testing.T) {
	ctx := context.Background()
	var m quota.Memory
	for i := range 3 {
		if err := m.Take(ctx, alice, 3, 0); err != nil {
			t.Fatalf("post %d: %v", i+1, err)
		}
	}
	refusedAt(t, m.Take(ctx, alice, 3, 0), quota.Posts, 3)
	if err := m.Take(ctx, bob, 3, 0); err != nil {
		t.Fatal(err)
	}
}

// TestReleasingOneSlotKeepsTheOthers: a principal holding two slots and releasing one still holds
// the other, on both counters, so its bound is not reached again by one more than it allows.
func TestReleasingOneSlotKeepsTheOthers(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for name, q := range map[string]quota.Counter{"shared": engine(t, st, "engine"), "memory": &quota.Memory{}} {
		t.Run(name, func(t *testing.T) {
			for i := range 2 {
				if err := q.Admit(ctx, slot(quota.Tickets, alice, i), 2, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Release(ctx, slot(quota.Tickets, alice, 0)); err != nil {
				t.Fatal(err)
			}
			if n, err := q.Held(ctx, quota.Tickets, alice, 0); err != nil || n != 1 {
				t.Fatalf("held after releasing one of two: %d, %v; want 1", n, err)
			}
			if err := q.Admit(ctx, slot(quota.Tickets, alice, 2), 2, 0); err != nil {
				t.Fatal(err)
			}
			refusedAt(t, q.Admit(ctx, slot(quota.Tickets, alice, 3), 2, 0), quota.Tickets, 2)
		})
	}
}
