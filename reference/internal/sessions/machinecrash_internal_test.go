package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// diskStore plays a machine that may lose what did not wait for the disk: a store whose files
// are copied aside, as the disk holds them, after every commit that waits for it (store.Relaxed:
// such a commit makes the relaxed ones before it durable too), and not after a relaxed one. A
// crash of the machine is the copy: the relaxed commits since the last synced one are not in it.
// A crash of the store's server under a running engine is the store swapped for the copy.
type diskStore struct {
	cur       atomic.Pointer[sqlite.SQLite]
	t         *testing.T
	dir, disk string

	mu sync.Mutex
	// syncsLeft is how many syncs apart (SyncRelaxed) the disk still makes; after them each one
	// fails, as a disk that stops answering would (negative: no end). openDisk makes none.
	syncsLeft int
	updates   int // the commits that waited for the disk
}

// synced is how many commits waited for the disk.
func (d *diskStore) synced() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.updates
}

func (d *diskStore) s() *sqlite.SQLite { return d.cur.Load() }

func (d *diskStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.s().Update(ctx, fn); err != nil {
		return err
	}
	d.updates++
	copyFiles(d.t, d.dir, d.disk)
	return nil
}

func (d *diskStore) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.s().UpdateRelaxed(ctx, fn)
}

func (d *diskStore) LossEpoch() int64 { return d.s().LossEpoch() }

// errDiskGaveUp is what a sync apart answers once the disk made its last (syncsLeft).
var errDiskGaveUp = errors.New("the disk made no more syncs")

// SyncRelaxed makes the relaxed commits before it durable: the disk copy is made anew.
func (d *diskStore) SyncRelaxed(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.syncsLeft == 0 {
		return errDiskGaveUp
	}
	d.syncsLeft--
	if err := d.s().SyncRelaxed(ctx); err != nil {
		return err
	}
	copyFiles(d.t, d.dir, d.disk)
	return nil
}

func (d *diskStore) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	return d.s().ReadForward(ctx, stream, gen, after, limit)
}

func (d *diskStore) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	return d.s().ReadBackward(ctx, stream, gen, before, limit)
}

func (d *diskStore) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	return d.s().Head(ctx, stream, gen)
}

func (d *diskStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	return d.s().Meta(ctx, key)
}

func (d *diskStore) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	return d.s().MetaPrefix(ctx, prefix)
}

func (d *diskStore) Subscribe(stream string) (<-chan struct{}, func()) {
	return d.s().Subscribe(stream)
}

func (d *diskStore) Close() error { return d.s().Close() }

// restartServer swaps the store for its disk copy, opened on another boot as the store of a
// server that started again after a crash would be.
func (d *diskStore) restartServer() {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir := d.t.TempDir()
	copyFiles(d.t, d.disk, dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "loom.db"), sqlite.Options{BootID: "after-a-restart"})
	require.NoError(d.t, err)
	d.t.Cleanup(func() { st.Close() })
	d.cur.Store(st)
	d.dir = dir
}

// copyFiles puts a copy of the store's files in dir src (its shared-memory index aside) in dir
// dst, made anew.
func copyFiles(t *testing.T, src, dst string) {
	require.NoError(t, os.RemoveAll(dst))
	require.NoError(t, os.MkdirAll(dst, 0o700))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), "-shm") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
}

// openDisk opens the store in dir on the given boot, its disk copy kept in a directory of its own.
func openDisk(t *testing.T, dir, boot string) *diskStore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "loom.db"), sqlite.Options{BootID: boot})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	d := &diskStore{t: t, dir: dir, disk: filepath.Join(t.TempDir(), "disk")}
	d.cur.Store(st)
	return d
}

// crashRig is a session service over a diskStore.
type crashRig struct {
	t   *testing.T
	st  *diskStore
	svc *Service
	k   *kernel.Kernel
	id  string
	p   model.Provider
}

// newCrashRig opens a service over st, its conversations completing through p (nil: the built-in
// model); id names the session to use ("" starts a conversation).
func newCrashRig(t *testing.T, st *diskStore, id string, p model.Provider) *crashRig {
	t.Helper()
	ctx := context.Background()
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, conversation.Deps{Provider: p}, live.NewHub(0))
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	cv := dl.Client(k)
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	svc := New(k, cv, Config{Poll: time.Hour, Now: now})
	r := &crashRig{t: t, st: st, svc: svc, k: k, id: id, p: p}
	t.Cleanup(r.stop)
	if id == "" {
		started, _, err := cv.Start(ctx, qAlice, conversation.StartOptions{})
		require.NoError(t, err)
		r.id = started.ID
	}
	_, err = svc.Open(ctx, qAlice, r.id, 0, "")
	require.NoError(t, err)
	return r
}

func (r *crashRig) stop() {
	r.svc.Close()
	r.k.Close()
}

// crash stops the service on a machine that then loses what the disk does not hold, and opens
// it again on the disk, whose store counts one more possible loss.
func (r *crashRig) crash() *crashRig {
	r.stop()
	r.st.mu.Lock()
	disk := r.st.disk
	r.st.mu.Unlock()
	return newCrashRig(r.t, openDisk(r.t, disk, "another-boot"), r.id, r.p)
}

func (r *crashRig) status(n int) stream.Frame {
	fs, err := r.svc.Append(context.Background(), qAlice, r.id, stream.Spec{Kind: stream.KindStatus, Data: map[string]int{"n": n}})
	require.NoError(r.t, err)
	require.Len(r.t, fs, 1)
	return fs[0]
}

// replay subscribes after cursor from: what is served, whether it is a reset, the head and the
// floor.
func (r *crashRig) replay(from int64) ([]stream.Frame, bool, int64, int64) {
	sub, fs, reset, head, floor, err := r.svc.Subscribe(context.Background(), r.id, from)
	require.NoError(r.t, err)
	sub.Close()
	return fs, reset, head, floor
}

// A machine that loses every commit that did not wait for the disk takes back no cursor a reader
// holds (spec/stream.md, "What a cursor promises across a crash"): a reader holding a cursor it
// was served is reset, or the log still reaches its cursor and holds, at every cursor of its that
// the log still serves, the frame it was served; and the next frame goes above every cursor handed
// out. The crash comes after one frame, a few, and more than a reservation's worth of them, on a
// disk that makes no sync apart from a commit (the reservation moves on only with a commit that
// waits) and on one that makes every sync apart asked of it.
func TestAMachineThatLosesRelaxedCommitsTakesBackNoCursor(t *testing.T) {
	for _, c := range []struct{ n, syncs int }{{1, 0}, {3, 0}, {300, 0}, {1, -1}, {3, -1}, {300, -1}} {
		n := c.n
		d := openDisk(t, t.TempDir(), "a-boot")
		d.syncsLeft = c.syncs
		r := newCrashRig(t, d, "", nil)
		held := map[int64]stream.Frame{}
		var top int64
		for i := 1; i <= n; i++ {
			f := r.status(i)
			held[f.Cur], top = f, f.Cur
		}
		r = r.crash()
		r.requireNoCursorTakenBack(held, top)
	}
}

// requireNoCursorTakenBack checks a session opened again after a crash of the machine against
// the frames handed out before it (held, the newest at top): the store counts the possible loss;
// a reader holding any of them is reset, or the log still reaches its cursor and holds, at every
// cursor of its that the log still serves, the frame it was served; the next frame goes above top.
func (r *crashRig) requireNoCursorTakenBack(held map[int64]stream.Frame, top int64) {
	t, n := r.t, len(held)
	require.EqualValues(t, 1, r.k.LossEpoch(), "n=%d: the store counts the possible loss", n)
	_, _, _, floor := r.replay(0)
	kept, reset, _, _ := r.replay(floor - 1)
	require.False(t, reset, "n=%d: a replay from the floor", n)
	now := map[int64]stream.Frame{}
	for _, f := range kept {
		now[f.Cur] = f
	}
	for c := range held {
		_, reset, head, _ := r.replay(c)
		if reset {
			continue
		}
		require.GreaterOrEqual(t, head, c, "n=%d: a reader at %d is not reset, so the log reaches its cursor", n, c)
		for cur, f := range held {
			if g, ok := now[cur]; ok && cur <= c {
				require.Equal(t, f, g, "n=%d: a reader at %d holds frame %d as it was served", n, c, cur)
			}
		}
	}
	next := r.status(n + 1)
	require.Greater(t, next.Cur, top, "n=%d: the log goes on above every cursor handed out", n)
}

// reservation is the newest cursor the session may hand out now.
func (r *crashRig) reservation() int64 {
	ss, err := r.svc.acquire(context.Background(), r.id)
	require.NoError(r.t, err)
	defer r.svc.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.reserved
}

// A reservation moved on by a sync apart from the frames' commits (reserve.go) lets frames past
// the reservation a commit waited for be handed out without waiting; a crash of the machine after
// that sync still takes back no cursor. The disk makes one sync apart and no more, so the frames
// past the first reservation stand on that sync alone, and the disk holds the position written
// with it: its reservation ahead, not its synced one, bounds what a reader may hold. A disk that
// makes no sync apart leaves the reservation where it is: the frame that outruns it waits for the
// disk, and the crash takes back nothing either.
func TestAReservationSyncedApartTakesBackNoCursor(t *testing.T) {
	for _, syncs := range []int{1, 0} {
		d := openDisk(t, t.TempDir(), "a-boot")
		d.syncsLeft = syncs
		r := newCrashRig(t, d, "", nil)
		held := map[int64]stream.Frame{}
		var top int64
		add := func(n int) {
			f := r.status(n)
			held[f.Cur], top = f, f.Cur
		}
		add(1)
		first := r.reservation()
		for i := 2; top+reserveAhead/2 <= first; i++ {
			add(i)
		}
		r.svc.syncs.Wait() // the sync apart started by the commit that used half the reservation
		require.Equal(t, syncs > 0, r.reservation() > first, "syncs %d: the sync apart moves the reservation on", syncs)
		synced := d.synced()
		for i := len(held) + 1; top <= first+reserveAhead/4; i++ {
			add(i)
		}
		if syncs > 0 {
			require.Equal(t, synced, d.synced(), "no frame past the first reservation waited for the disk")
		} else {
			require.Greater(t, d.synced(), synced, "the frame past the reservation waited for the disk")
		}
		r.svc.syncs.Wait()
		r = r.crash()
		r.requireNoCursorTakenBack(held, top)
	}
}

// A message queued while the assistant works was answered as kept (spec/stream.md: the commit
// that stores the steering queue waits for the disk), so a crash of the machine right after it
// keeps it queued, though the frames of the turn in progress may be lost.
func TestAQueuedMessageOutlivesAMachineCrash(t *testing.T) {
	ctx := context.Background()
	gate := scriptmodel.Gated()
	r := newCrashRig(t, openDisk(t, t.TempDir(), "a-boot"), "", gate)
	sent, err := r.svc.Send(ctx, qAlice, r.id, "first", "m1")
	require.NoError(t, err)
	require.Equal(t, StateSent, sent.State)
	require.Eventually(t, func() bool { return gate.Waited() == 1 }, 5*time.Second, time.Millisecond, "the model works on the first")
	sent, err = r.svc.Send(ctx, qAlice, r.id, "second", "m2")
	require.NoError(t, err)
	require.Equal(t, StateQueued, sent.State, "the assistant works on the first")
	r = r.crash()
	q, err := r.svc.loadQueue(ctx, r.id)
	require.NoError(t, err)
	var kept []string
	for _, it := range q.Items {
		kept = append(kept, it.Message+" "+it.State)
	}
	require.Contains(t, kept, "m2 "+StateQueued)
}

// The store's server may start again under a running engine and lose the relaxed commits since
// its last synced one while the session stays loaded. Whatever the session commits next (here
// first a thread note, a commit of the steering queue alone, which appends no frame), the log
// then goes on above every cursor it handed out (spec/stream.md, "What a cursor promises across
// a crash").
func TestALossUnderALoadedSessionTakesBackNoCursor(t *testing.T) {
	ctx := context.Background()
	r := newCrashRig(t, openDisk(t, t.TempDir(), "a-boot"), "", nil)
	sent, err := r.svc.Send(ctx, qAlice, r.id, "first", "m1")
	require.NoError(t, err)
	require.Equal(t, StateSent, sent.State)
	require.Eventually(t, func() bool {
		fs, _, _, _ := r.replay(0)
		for _, f := range fs {
			if f.Kind() == stream.KindTextDone {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the reply to the first message is logged")
	var top int64
	for i := 1; i <= 3; i++ {
		top = r.status(i).Cur
	}
	r.st.restartServer()
	require.EqualValues(t, 1, r.k.LossEpoch(), "the store counts the possible loss")
	_, _ = r.svc.SendThread(ctx, qAlice, r.id, "and then?", "m2", "m1") // either answer is the spec's
	// A commit may fail on what the store lost (the session is then loaded again): the next one
	// is judged.
	spec := stream.Spec{Kind: stream.KindStatus, Data: map[string]int{"n": 4}}
	fs, err := r.svc.Append(ctx, qAlice, r.id, spec)
	if err != nil {
		fs, err = r.svc.Append(ctx, qAlice, r.id, spec)
	}
	require.NoError(t, err)
	require.Len(t, fs, 1)
	require.Greater(t, fs[0].Cur, top, "the log goes on above every cursor handed out")
}
