package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// heldWalk is a store whose listing of the execution records waits until release is closed: a
// kernel opened on it has walked none of them, for as long as a test needs.
type heldWalk struct {
	store.Store
	release chan struct{}
	walks   atomic.Int64
}

func (h *heldWalk) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if prefix == kernel.InfoKey("") {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		h.walks.Add(1)
	}
	return h.Store.MetaPrefix(ctx, prefix)
}

// lockedLog is a log the kernel writes to and a test reads.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// walkRig reopens a store on which setup left executions, with the walk of the records held.
type walkRig struct {
	k    *kernel.Kernel
	held *heldWalk
	log  *lockedLog
	runs *atomic.Int64
}

func (r *walkRig) releaseWalk() {
	select {
	case <-r.held.release:
	default:
		close(r.held.release)
	}
}

// awaiter awaits the end of the execution its input names and completes with that one's output.
func awaiter(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	var id string
	if err := json.Unmarshal(input, &id); err != nil {
		return nil, err
	}
	in, err := c.AwaitEnd(id)
	if err != nil {
		return nil, err
	}
	return in.Output, nil
}

func newWalkRig(t *testing.T, setup func(k *kernel.Kernel, st store.Store)) *walkRig {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	var calls atomic.Int64
	flows := map[string]kernel.Flow{"echo": echo(&calls), "await": awaiter}
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: flows})
	require.NoError(t, err)
	setup(k, st)
	require.NoError(t, k.Close())
	require.NoError(t, st.Close())

	st, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	r := &walkRig{held: &heldWalk{Store: st, release: make(chan struct{})}, log: &lockedLog{}, runs: &calls}
	lg := slog.New(slog.NewTextHandler(r.log, nil))
	r.k, err = kernel.Open(ctx, r.held, kernel.Options{Flows: flows, Logger: lg})
	require.NoError(t, err)
	t.Cleanup(func() {
		r.releaseWalk()
		r.k.Close()
		st.Close()
	})
	return r
}

func startEcho(t *testing.T, k *kernel.Kernel, id string) {
	t.Helper()
	_, err := k.Start(context.Background(), kernel.StartRequest{ID: id, Flow: "echo", Principal: alice})
	require.NoError(t, err)
}

// Open returns before it has read a single execution record; a message to an open execution the
// walk has not reached finds it by its key and is answered, its backlog is read from its own
// cursor, and once the walk goes on every open execution is recovered, the one already running
// not a second time.
func TestOpenServesBeforeTheRecordsAreWalked(t *testing.T) {
	r := newWalkRig(t, func(k *kernel.Kernel, _ store.Store) {
		for _, id := range []string{"a", "b", "done"} {
			startEcho(t, k, id)
			require.True(t, send(t, k, id, "m1", "hello"))
		}
		require.True(t, send(t, k, "done", "m2", "stop"))
		info, err := k.Await(context.Background(), "done")
		require.NoError(t, err)
		require.Equal(t, kernel.StateCompleted, info.State)
		waitFor(t, "the first answers", func() bool { return backlogEmpty(t, k, "a") && backlogEmpty(t, k, "b") })
	})
	ctx := context.Background()
	require.Zero(t, r.held.walks.Load(), "no record walked yet")
	require.True(t, backlogEmpty(t, r.k, "a"), "a's one message was consumed before the restart")

	before := r.runs.Load()
	require.True(t, send(t, r.k, "a", "m2", "again"))
	waitFor(t, "a's answer", func() bool { return r.runs.Load() == before+1 })
	require.Zero(t, r.held.walks.Load())
	select {
	case <-r.k.Recovered():
		t.Fatal("recovered before the walk")
	default:
	}
	_, err := r.k.Send(ctx, "done", alice, "m3", json.RawMessage(`"late"`))
	require.Error(t, err, "an ended execution takes no message, walked or not")

	r.releaseWalk()
	<-r.k.Recovered()
	require.EqualValues(t, 1, r.held.walks.Load())
	require.True(t, send(t, r.k, "b", "m2", "again"))
	require.True(t, send(t, r.k, "a", "m3", "stop"))
	info, err := r.k.Await(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.JSONEq(t, `3`, string(info.Output), "a was replayed once: its count holds each message once")
}

func backlogEmpty(t *testing.T, k *kernel.Kernel, id string) bool {
	t.Helper()
	msgs, err := k.Backlog(context.Background(), id, 10)
	require.NoError(t, err)
	return len(msgs) == 0
}

// An execution awaiting another that the walk has not reached finds it open, wakes it and
// waits for its end, rather than taking it for one that is not running.
func TestAnAwaitedExecutionIsFoundBeforeTheWalk(t *testing.T) {
	r := newWalkRig(t, func(k *kernel.Kernel, _ store.Store) {
		startEcho(t, k, "child")
		parked := make(chan struct{})
		kernel.SetParkHook(k, func(id, site string) {
			if id == "parent" && site == "await child" {
				close(parked)
			}
		})
		_, err := k.Start(context.Background(), kernel.StartRequest{ID: "parent", Flow: "await", Principal: alice, Input: json.RawMessage(`"child"`)})
		require.NoError(t, err)
		<-parked
	})
	ctx := context.Background()
	require.NoError(t, r.k.Recover(ctx, "parent"))
	require.True(t, send(t, r.k, "child", "m1", "stop"))
	info, err := r.k.Await(ctx, "parent")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.JSONEq(t, `1`, string(info.Output))
	require.Zero(t, r.held.walks.Load(), "all of it before the walk")
}

// A record that does not decode is reported once, whether a request or the walk met it first,
// and the execution it stands for is not served.
func TestAnUnreadableRecordIsReportedOnce(t *testing.T) {
	r := newWalkRig(t, func(k *kernel.Kernel, st store.Store) {
		startEcho(t, k, "ok")
		require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
			return tx.PutMeta(kernel.InfoKey("bad"), []byte("{not json"))
		}))
	})
	_, err := r.k.Send(context.Background(), "bad", alice, "m1", json.RawMessage(`"hi"`))
	require.Error(t, err)
	require.Equal(t, 1, r.log.count("unreadable execution record"))
	r.releaseWalk()
	<-r.k.Recovered()
	require.Equal(t, 1, r.log.count("unreadable execution record"), "reported once")
	require.True(t, send(t, r.k, "ok", "m1", "hello"))
}

// damagedRecord is a store whose record of one execution reads as damaged, alone and in a walk.
type damagedRecord struct {
	store.Store
	key string
}

func (d damagedRecord) damage() error {
	return &store.CorruptError{Path: "test", Table: "meta", Key: d.key, Reason: "checksum does not match"}
}

func (d damagedRecord) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if key == d.key {
		return nil, false, d.damage()
	}
	return d.Store.Meta(ctx, key)
}

func (d damagedRecord) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if strings.HasPrefix(d.key, prefix) {
		return nil, d.damage()
	}
	return d.Store.MetaPrefix(ctx, prefix)
}

// A walk that meets a damaged record refuses that record's execution and reports it once; the
// other open executions are still found by key and served.
func TestADamagedRecordInTheWalkIsRefused(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	flows := map[string]kernel.Flow{"echo": echo(&calls)}
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: flows})
	require.NoError(t, err)
	startEcho(t, k, "bad")
	startEcho(t, k, "good")
	require.NoError(t, k.Close())

	var mu sync.Mutex
	reported := map[string]int{}
	k, err = kernel.Open(ctx, damagedRecord{Store: st, key: kernel.InfoKey("bad")}, kernel.Options{Flows: flows,
		Logger: slog.New(slog.NewTextHandler(&lockedLog{}, nil)),
		OnCorrupt: func(id string, err error) {
			mu.Lock()
			reported[id]++
			mu.Unlock()
		}})
	require.NoError(t, err)
	defer k.Close()
	<-k.Recovered()
	_, err = k.Send(ctx, "bad", alice, "m1", json.RawMessage(`"hi"`))
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	require.True(t, send(t, k, "good", "m1", "hello"))
	waitFor(t, "the good one answers", func() bool { return calls.Load() == 1 })
	mu.Lock()
	require.Equal(t, map[string]int{"bad": 1}, reported)
	mu.Unlock()
}

// failingWalk is a store whose listing of the execution records fails, as a database that does
// not answer does, until fails reaches zero.
type failingWalk struct {
	store.Store
	fails atomic.Int64
	walks atomic.Int64
}

func (f *failingWalk) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if prefix == kernel.InfoKey("") {
		f.walks.Add(1)
		if f.fails.Add(-1) >= 0 {
			return nil, errors.New("connection refused")
		}
	}
	return f.Store.MetaPrefix(ctx, prefix)
}

// A walk of the records that fails for a reason other than damage is tried again until one
// succeeds: an open execution nothing names is still recovered (its flow runs again).
func TestAWalkThatFailsIsTriedAgain(t *testing.T) {
	ctx := context.Background()
	// runs counts the times the flow began: at its start, and again at each recovery.
	flows := func(runs *atomic.Int64) map[string]kernel.Flow {
		return map[string]kernel.Flow{"wait": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
			runs.Add(1)
			for {
				if _, err := c.Receive(); err != nil {
					return nil, err
				}
			}
		}}
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	var first atomic.Int64
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: flows(&first)})
	require.NoError(t, err)
	_, err = k.Start(ctx, kernel.StartRequest{ID: "quiet", Flow: "wait", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "the flow's start", func() bool { return first.Load() == 1 })
	require.NoError(t, k.Close())

	fw := &failingWalk{Store: st}
	fw.fails.Store(2)
	log := &lockedLog{}
	var again atomic.Int64
	k, err = kernel.Open(ctx, fw, kernel.Options{Flows: flows(&again), Logger: slog.New(slog.NewTextHandler(log, nil))})
	require.NoError(t, err)
	defer k.Close()
	<-k.Recovered()
	require.EqualValues(t, 3, fw.walks.Load(), "two failed walks, then one that succeeded")
	require.Equal(t, 2, log.count("trying again"))
	waitFor(t, "the open execution recovered with nothing naming it", func() bool { return again.Load() == 1 })
}
