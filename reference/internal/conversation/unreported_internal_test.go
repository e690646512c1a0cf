package conversation

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// holdingStore holds one commit that appends to a stream ending in suffix, once armed: the
// transaction has run and waits, uncommitted, until release is closed (held is closed then).
// Every later such commit waits for gate, so that nothing after the held one reaches the log
// while the test looks.
type holdingStore struct {
	store.Store
	mu        sync.Mutex
	suffix    string
	armed     bool
	holding   bool
	held      chan struct{}
	release   chan struct{}
	committed chan struct{}
	gate      chan struct{}
}

func newHoldingStore(st store.Store) *holdingStore {
	return &holdingStore{Store: st, held: make(chan struct{}), release: make(chan struct{}),
		committed: make(chan struct{}), gate: make(chan struct{})}
}

// arm makes the next commit that appends to a stream named for id the held one.
func (s *holdingStore) arm(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.suffix, s.armed = "/"+id, true
}

// appendSpy notes whether a transaction appended to a stream ending in suffix.
type appendSpy struct {
	store.Tx
	suffix string
	hit    bool
}

func (x *appendSpy) Append(stream string, gen, expect int64, evs ...store.NewEvent) (int64, error) {
	head, err := x.Tx.Append(stream, gen, expect, evs...)
	if err == nil && x.suffix != "" && strings.HasSuffix(stream, x.suffix) && !strings.HasPrefix(stream, "in/") {
		x.hit = true
	}
	return head, err
}

func (s *holdingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	mine := false
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		s.mu.Lock()
		spy := &appendSpy{Tx: tx, suffix: s.suffix}
		s.mu.Unlock()
		if err := fn(spy); err != nil || !spy.hit {
			return err
		}
		s.mu.Lock()
		first := s.armed && !s.holding
		if first {
			s.holding, mine = true, true
		}
		s.mu.Unlock()
		if first {
			close(s.held)
			<-s.release
			return nil
		}
		<-s.gate
		return nil
	})
	if mine {
		close(s.committed)
	}
	return err
}

// TestACommitTheTailWasNotToldOfIsRead: a follower whose tail holds nothing reads the log up to
// its head; a commit then lands whose report never reaches the tail. The follower's next read
// from the head returns that commit, as the log holds it: a tail that holds nothing knows no
// head, and a read from there is the log's.
//
// The report is lost the way it is in the engine: the commit's transaction began while nobody
// watched any log of the kernel (as at its start, or after a restart of the engine, before a
// stream follows a conversation again), so the kernel noted nothing of what it appended, and the
// follower's tail was made while it was in flight.
func TestACommitTheTailWasNotToldOfIsRead(t *testing.T) {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	st := newHoldingStore(raw)
	hub := live.NewHub(0)
	dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, Deps{}, hub)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close(); raw.Close() })
	var once sync.Once
	open := func() { once.Do(func() { close(st.gate) }) }
	t.Cleanup(open) // runs before the kernel closes: what waits at the gate goes on
	cv := dl.Client(k)
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	started, _, err := cv.Start(ctx, alice, StartOptions{})
	require.NoError(t, err)
	id := started.ID

	st.arm(id)
	_, err = cv.SendTurn(ctx, alice, id, "question 1", SendOptions{MessageID: "m1"})
	require.NoError(t, err)
	deadline := time.After(10 * time.Second)
	select {
	case <-st.held:
	case <-deadline:
		t.Fatal("no commit of the conversation's log within 10 s")
	}

	// The commit is in flight: the tail is made now, and a read of the log reaches the head
	// before it.
	f := cv.Follow(id)
	defer f.Close()
	var head loomtype.Cursor
	for done := false; !done; {
		_, next, d, err := f.Read(ctx, head, 100)
		require.NoError(t, err)
		head, done = next, d
	}
	close(st.release)
	select {
	case <-st.committed:
	case <-deadline:
		t.Fatal("the held commit did not end within 10 s")
	}
	fig, ok := hub.Tail(id)
	require.True(t, ok)
	require.Zero(t, fig.Records, "the premise: the commit was not reported to the tail")

	want, wnext, wdone, err := cv.ReadForward(ctx, id, head, 100)
	require.NoError(t, err)
	require.NotEmpty(t, want, "the held commit appended entries after the head read before it")
	got, next, done, err := f.Read(ctx, head, 100)
	require.NoError(t, err)
	require.Equal(t, marshal(t, want), marshal(t, got), "a read from the head after an unreported commit")
	require.Equal(t, wnext, next)
	require.Equal(t, wdone, done)
	open()
}
