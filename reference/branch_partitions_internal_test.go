package reference

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// brancher branches session id at message under key, as who, on one partition's engine.
type brancher func(who loomtype.Identity, id, message, key string) (sessions.Branched, error)

// engineBrancher is the branch of e's sessions.
func engineBrancher(e *Engine) brancher {
	return func(who loomtype.Identity, id, message, key string) (sessions.Branched, error) {
		return e.ss.Branch(context.Background(), who, id, message, key)
	}
}

// keyIsOneAcrossPartitions checks the rule of a branch's Idempotency-Key (spec/http.md, Branch:
// the caller's key used before for another branch is key-reused) on sessions ca and cb of who,
// whose message m1 each was accepted, run by two partitions' engines a and b: a key is one key
// whatever partition its sessions fall in, in either order, and two branches racing under one
// key make one branch.
func keyIsOneAcrossPartitions(t *testing.T, who loomtype.Identity, a, b brancher, ca, cb string) {
	t.Helper()
	first, err := a(who, ca, "m1", "k1")
	require.NoError(t, err)
	_, err = b(who, cb, "m1", "k1")
	require.ErrorIs(t, err, sessions.ErrKeyReused, "the key of a branch of another partition's session")
	again, err := a(who, ca, "m1", "k1")
	require.NoError(t, err)
	require.Equal(t, first, again, "the same branch under the same key")

	_, err = b(who, cb, "m1", "k2")
	require.NoError(t, err)
	_, err = a(who, ca, "m1", "k2")
	require.ErrorIs(t, err, sessions.ErrKeyReused, "the other way round")

	// Two branches racing under one key: one is made, the other refused.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, br := range []brancher{a, b} {
		wg.Go(func() { _, errs[i] = br(who, []string{ca, cb}[i], "m1", "k3") })
	}
	wg.Wait()
	made, reused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case errors.Is(err, sessions.ErrKeyReused):
			reused++
		default:
			require.NoError(t, err)
		}
	}
	require.Equal(t, [2]int{1, 1}, [2]int{made, reused}, "branches made and refused under a key two partitions raced for")
}

// acceptedMessage sends text as message m1 of who's conversation id on e and waits until it was
// answered.
func acceptedMessage(t *testing.T, e *Engine, who loomtype.Identity, id, text string) {
	t.Helper()
	_, err := e.ss.Send(context.Background(), who, id, text, "m1")
	require.NoError(t, err)
	entriesOf(t, e, who, id, 2)
}

// entriesOf waits until who's conversation id on e holds at least n entries and returns each as
// its role, status, message id and text.
func entriesOf(t *testing.T, e *Engine, who loomtype.Identity, id string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appended, stop := e.cv.WatchLog(id)
	defer stop()
	for {
		h, err := e.cv.History(ctx, who, id, conversation.HistoryOptions{Direction: "forward", Limit: 10})
		require.NoError(t, err)
		if len(h.Entries) >= n {
			out := make([]string, len(h.Entries))
			for i, x := range h.Entries {
				text := ""
				if x.Text != nil {
					text = *x.Text
				}
				out[i] = string(x.Role) + " " + string(x.Status) + " " + x.MessageID + " " + text
			}
			return out
		}
		select {
		case <-appended:
		case <-ctx.Done():
			t.Fatalf("%s never held %d entries: %v", id, n, h.Entries)
		}
	}
}

// TestABranchStartedAgainAddsNoTurn: making a branch's conversation is idempotent (a node asks
// again when the holder died before it answered, and a client retries under its key), so a
// second StartBranch, before or after the first turn was answered, sends no second turn. The
// whole history is compared once a later message was answered after it.
func TestABranchStartedAgainAddsNoTurn(t *testing.T) {
	raw := sharedStore(t)
	e := partitionEngine(t, raw, 0, func(o *Options) { o.Deps.Provider = scriptmodel.Echo("You said: ") })
	var b sessions.BranchStart
	for k := 0; b.Chosen == ""; k++ {
		chosen := "branch-" + strconv.Itoa(k)
		if j, err := partition.Of(partition.KeyOf(conversation.ChosenID(qAlice, chosen)), 2); err == nil && j == 0 {
			b = sessions.BranchStart{Who: qAlice, Chosen: chosen, Text: "hello", MessageID: "k1"}
		}
	}
	ctx := context.Background()
	id := conversation.ChosenID(qAlice, b.Chosen)
	require.NoError(t, sessions.StartBranch(ctx, e.cv, b))
	require.NoError(t, sessions.StartBranch(ctx, e.cv, b), "at once again")
	entriesOf(t, e, qAlice, id, 2)
	require.NoError(t, sessions.StartBranch(ctx, e.cv, b), "again once answered")
	_, err := e.ss.Send(ctx, qAlice, id, "later", "m2")
	require.NoError(t, err)
	require.Equal(t, []string{
		"user accepted k1 hello",
		"assistant complete  You said: hello",
		"user accepted m2 later",
		"assistant complete  You said: later",
	}, entriesOf(t, e, qAlice, id, 4))
}

// TestABranchKeyIsOneAcrossPartitions: two engines of one SQLite store, partitions 0 and 1 of
// two, each with a session of alice's; a branch's key is refused as reused across them as it is
// within one.
func TestABranchKeyIsOneAcrossPartitions(t *testing.T) {
	raw := sharedStore(t)
	var engs [2]*Engine
	elsewhere := func(o *Options) {
		o.Deps.Provider = scriptmodel.Echo("You said: ")
		o.Stream.Elsewhere = func(ctx context.Context, b sessions.BranchStart) error {
			i, err := partition.Of(partition.KeyOf(conversation.ChosenID(b.Who, b.Chosen)), 2)
			if err != nil {
				return err
			}
			return sessions.StartBranch(ctx, engs[i].cv, b)
		}
	}
	engs[0], engs[1] = partitionEngine(t, raw, 0, elsewhere), partitionEngine(t, raw, 1, elsewhere)
	ca, cb := conversationOf(t, engs[0], qAlice), conversationOf(t, engs[1], qAlice)
	acceptedMessage(t, engs[0], qAlice, ca, "one")
	acceptedMessage(t, engs[1], qAlice, cb, "two")
	keyIsOneAcrossPartitions(t, qAlice, engineBrancher(engs[0]), engineBrancher(engs[1]), ca, cb)
	// Another caller's key is its own.
	cbob := conversationOf(t, engs[1], qBob)
	acceptedMessage(t, engs[1], qBob, cbob, "three")
	_, err := engs[1].ss.Branch(context.Background(), qBob, cbob, "m1", "k1")
	require.NoError(t, err)
}

// TestABranchKeyIsOneAcrossNodes: the same on PostgreSQL, two nodes of four partitions, the
// sessions in partitions 0 (node a's) and 2 (node b's).
func TestABranchKeyIsOneAcrossNodes(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, nil)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, func(i int) bool { return i >= 2 }, nil)
	waitHeld(t, b, 2, 3)
	ea, eb := a.engineOf(0), b.engineOf(2)
	ids := make([]string, 2)
	for j, e := range []*Engine{ea, eb} {
		s, _, err := e.cv.Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, 2*j, p)})
		require.NoError(t, err)
		ids[j] = s.ID
		acceptedMessage(t, e, anonymous, s.ID, "hello")
	}
	keyIsOneAcrossPartitions(t, anonymous, engineBrancher(ea), engineBrancher(eb), ids[0], ids[1])
}

// TestABranchIsFinishedByARetryUnderItsKey: a branch whose conversation falls in the other
// partition, whose first attempt bound its key and then failed where the branch is made, is
// made by the retry under the same key; its first turn carries the key as its message id (spec/http.md,
// Branch), and a further retry adds nothing. The whole history is compared once a later message
// was answered after it.
func TestABranchIsFinishedByARetryUnderItsKey(t *testing.T) {
	raw := sharedStore(t)
	var engs [2]*Engine
	var mu sync.Mutex
	calls := 0
	errLost := errors.New("the holder died before it answered")
	elsewhere := func(o *Options) {
		o.Deps.Provider = scriptmodel.Echo("You said: ")
		o.Stream.Elsewhere = func(ctx context.Context, b sessions.BranchStart) error {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				return errLost
			}
			i, err := partition.Of(partition.KeyOf(conversation.ChosenID(b.Who, b.Chosen)), 2)
			if err != nil {
				return err
			}
			return sessions.StartBranch(ctx, engs[i].cv, b)
		}
	}
	engs[0], engs[1] = partitionEngine(t, raw, 0, elsewhere), partitionEngine(t, raw, 1, elsewhere)
	ca := conversationOf(t, engs[0], qAlice)
	acceptedMessage(t, engs[0], qAlice, ca, "one")
	ctx := context.Background()
	key := ""
	for k := 0; key == "" && k < 64; k++ {
		if _, err := engs[0].ss.Branch(ctx, qAlice, ca, "m1", "k"+strconv.Itoa(k)); errors.Is(err, errLost) {
			key = "k" + strconv.Itoa(k)
		} else {
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, key, "no branch fell in the other partition")
	b, err := engs[0].ss.Branch(ctx, qAlice, ca, "m1", key)
	require.NoError(t, err, "the retry")
	again, err := engs[0].ss.Branch(ctx, qAlice, ca, "m1", key)
	require.NoError(t, err, "a further retry")
	require.Equal(t, b, again)
	i, err := partition.Of(partition.KeyOf(b.Session), 2)
	require.NoError(t, err)
	require.Equal(t, 1, i)
	entriesOf(t, engs[1], qAlice, b.Session, 2)
	_, err = engs[1].ss.Send(ctx, qAlice, b.Session, "later", "m2")
	require.NoError(t, err)
	require.Equal(t, []string{
		"user accepted " + key + " one",
		"assistant complete  You said: one",
		"user accepted m2 later",
		"assistant complete  You said: later",
	}, entriesOf(t, engs[1], qAlice, b.Session, 4))
}
