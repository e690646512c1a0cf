package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// relaxedAppend appends one event to (stream, 0) in one relaxed Update.
func relaxedAppend(st *SQLite, stream string) error {
	return st.UpdateRelaxed(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(stream, 0, -1, store.NewEvent{Kind: "x"})
		return err
	})
}

// pragma reads an integer pragma of the writer's connection (no Update runs meanwhile).
func pragma(t *testing.T, st *SQLite, name string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, st.wc.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v))
	return v
}

// A relaxed commit leaves the writer at synchronous=NORMAL (1) without checkpoints of its own;
// a synced one puts FULL (2) and SQLite's checkpoints back. The head file counts the events of
// synced commits only, until a synced commit (or Close) brings it up to date.
func TestRelaxedCommitsSkipTheSyncAndTheCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer st.Close()
	head := func() int64 {
		b, err := os.ReadFile(headPath(path))
		require.NoError(t, err)
		n, ok := parseHead(b)
		require.True(t, ok)
		return n
	}
	require.EqualValues(t, 2, pragma(t, st, "synchronous"), "a store opens synced")

	require.NoError(t, appendTo(st, "s", 0, nil))
	require.EqualValues(t, 1, head())
	require.NoError(t, relaxedAppend(st, "s"))
	require.EqualValues(t, 1, pragma(t, st, "synchronous"), "relaxed: NORMAL")
	require.EqualValues(t, 0, pragma(t, st, "wal_autocheckpoint"), "relaxed: no checkpoint on the commit's path")
	require.EqualValues(t, 1, head(), "the head file does not count a relaxed commit the disk may not have")

	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }))
	require.EqualValues(t, 2, pragma(t, st, "synchronous"), "synced: FULL")
	require.EqualValues(t, defaultAutoCheckpoint, pragma(t, st, "wal_autocheckpoint"))
	require.EqualValues(t, 2, head(), "a synced commit syncs the relaxed ones before it: the head file counts them")

	require.NoError(t, relaxedAppend(st, "s"))
	require.NoError(t, st.Close())
	require.EqualValues(t, 3, head(), "Close syncs the relaxed commits and counts them")
}

// An Open after a crash that followed relaxed commits leaves the head file behind them (the disk
// may not have them yet), as it was, until a synced commit syncs them and counts them. A killed
// store's head file says what it said at the kill.
func TestAnOpenAfterRelaxedCommitsLeavesTheHeadFileBehind(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	head := func() int64 {
		b, err := os.ReadFile(headPath(path))
		require.NoError(t, err)
		n, ok := parseHead(b)
		require.True(t, ok)
		return n
	}
	st, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, appendTo(st, "s", 0, nil))
	require.NoError(t, relaxedAppend(st, "s"))
	require.NoError(t, relaxedAppend(st, "s"))
	st.Kill()
	<-st.Released()
	require.EqualValues(t, 1, head(), "the kill syncs and counts nothing")

	st, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	require.EqualValues(t, 1, head(), "Open does not count the relaxed events the disk may not have")
	require.EqualValues(t, 3, st.events, "the store knows every event it holds")
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }))
	require.EqualValues(t, 3, head(), "a synced commit syncs them and counts them")
	require.NoError(t, relaxedAppend(st, "s"))
	st.Kill()
	<-st.Released()

	st, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.EqualValues(t, 4, head(), "Close syncs and counts them")
}

// A batch led by a relaxed Update takes no member that waits for the disk: that one leads the
// next batch. Relaxed members join a synced batch.
func TestARelaxedBatchTakesNoSyncedMember(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "loom.db"), Options{})
	require.NoError(t, err)
	defer st.Close()
	inside, free := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- st.UpdateRelaxed(ctx, func(tx store.Tx) error {
			close(inside)
			<-free
			return nil
		})
	}()
	<-inside
	queue := func(relaxed bool) <-chan error {
		done := make(chan error, 1)
		go func() {
			if relaxed {
				done <- relaxedAppend(st, "r")
			} else {
				done <- appendTo(st, "s", -1, nil)
			}
		}()
		return done
	}
	queuedN := func(n int) {
		for {
			st.qmu.Lock()
			q := len(st.queue) - st.qhead
			st.qmu.Unlock()
			if q == n {
				return
			}
			select {
			case err := <-held:
				t.Fatalf("the held write ended: %v", err)
			default:
				runtime.Gosched()
			}
		}
	}
	before := st.commits.Load()
	synced := queue(false)
	queuedN(1)
	relaxed := queue(true)
	queuedN(2)
	close(free)
	require.NoError(t, <-held)
	require.NoError(t, <-synced)
	require.NoError(t, <-relaxed)
	// The held relaxed write committed alone (the synced one did not join it), and the relaxed
	// one joined the synced batch after it: two commits.
	require.EqualValues(t, 2, st.commits.Load()-before)
}

// The loss epoch goes up at an open after an unclean close on another boot of the machine, and
// only then; an epoch file that does not check is damage.
func TestTheLossEpochCountsUncleanOpensOnAnotherBoot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	open := func(boot string) *SQLite {
		st, err := Open(ctx, path, Options{BootID: boot})
		require.NoError(t, err)
		return st
	}
	kill := func(st *SQLite) {
		st.Kill()
		<-st.Released()
	}
	st := open("boot-a")
	require.EqualValues(t, 0, st.LossEpoch(), "a new store")
	require.NoError(t, relaxedAppend(st, "s"))
	kill(st)

	st = open("boot-a")
	require.EqualValues(t, 0, st.LossEpoch(), "a crash of the process, same boot: nothing relaxed was lost")
	kill(st)

	st = open("boot-b")
	require.EqualValues(t, 1, st.LossEpoch(), "unclean, and the machine started again")
	kill(st)

	st = open("boot-b")
	require.EqualValues(t, 1, st.LossEpoch(), "recorded with the boot it was raised on")
	require.NoError(t, st.Close())

	st = open("boot-c")
	require.EqualValues(t, 1, st.LossEpoch(), "a clean close synced everything: another boot loses nothing")
	require.NoError(t, st.Close())

	require.NoError(t, os.WriteFile(epochPath(path), []byte("loom epoch 7 boot-c 00000000\n"), 0o600))
	_, err := Open(ctx, path, Options{BootID: "boot-c"})
	require.ErrorIs(t, err, store.ErrCorrupt, "an epoch file that does not check")
}

// tornImage writes a store as a crash of the machine may leave it: synced commits k1..k3, then
// relaxed ones r1..r6 whose pages reached the disk out of order (a frame of the log's tail does
// not check, and later frames of the same log do). A second connection holds the database open
// so that the store's own close cannot fold the log into the database.
func tornImage(t *testing.T, boot string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := Open(ctx, path, Options{BootID: boot})
	require.NoError(t, err)
	hold, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer hold.Close()
	var n int
	require.NoError(t, hold.QueryRow(`SELECT count(*) FROM events`).Scan(&n))
	for i := 1; i <= 3; i++ {
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
			_, err := tx.Append("a", 0, -1, store.NewEvent{Kind: fmt.Sprintf("k%d", i)})
			return err
		}))
	}
	for i := 1; i <= 6; i++ {
		require.NoError(t, st.UpdateRelaxed(ctx, func(tx store.Tx) error {
			_, err := tx.Append("a", 0, -1, store.NewEvent{Kind: fmt.Sprintf("r%d", i)})
			return err
		}))
	}
	st.Kill()
	<-st.Released()
	// The files as the crash left them, copied while hold keeps the log from being folded.
	dst := filepath.Join(t.TempDir(), "loom.db")
	for _, suffix := range []string{"", "-wal", ".identity", ".head", ".newest", ".epoch"} {
		b, err := os.ReadFile(path + suffix)
		require.NoError(t, err, suffix)
		require.NoError(t, os.WriteFile(dst+suffix, b, 0o600))
	}
	path = dst
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	frames := (len(wal) - 32) / 4120
	require.GreaterOrEqual(t, frames, 6)
	wal[32+(frames-3)*4120+100] ^= 0x01 // a page of the relaxed tail, two frames before the end
	require.NoError(t, os.WriteFile(path+"-wal", wal, 0o600))
	return path
}

// A log whose tail is torn is damage after a crash of the process (nothing relaxed may be lost
// then, whatever the loss epoch already counts), and what a crash of the machine leaves after relaxed commits: the store opens, with its
// synced commits whole and the relaxed tail cut, and its loss epoch raised.
func TestATornRelaxedTailOpensOnlyAfterAMachineCrash(t *testing.T) {
	ctx := context.Background()
	path := tornImage(t, "boot-a")
	_, err := Open(ctx, path, Options{BootID: "boot-a"})
	require.ErrorIs(t, err, store.ErrCorrupt, "the same boot: the process crashed, and the log is damaged")

	// A store that counted a crash of the machine at an earlier open is held to the same rule when
	// only the process crashes: the earlier loss forgives nothing now.
	path = tornImage(t, "boot-a")
	require.NoError(t, os.WriteFile(epochPath(path), epochRecord(1, "boot-a"), 0o600))
	_, err = Open(ctx, path, Options{BootID: "boot-a"})
	require.ErrorIs(t, err, store.ErrCorrupt, "the same boot after an earlier loss: the log is damaged")

	path = tornImage(t, "boot-a")
	st, err := Open(ctx, path, Options{BootID: "boot-b"})
	require.NoError(t, err)
	defer st.Close()
	require.EqualValues(t, 1, st.LossEpoch())
	evs, err := st.ReadForward(ctx, "a", 0, 0, 100)
	require.NoError(t, err)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	require.GreaterOrEqual(t, len(kinds), 3)
	require.Less(t, len(kinds), 9, "the relaxed tail after the torn frame is gone")
	require.Equal(t, []string{"k1", "k2", "k3"}, kinds[:3], "the synced commits are whole")
}

// walPages is the length of the store's write-ahead log, in pages of 4 KiB.
func walPages(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return fi.Size() / 4096
}

// Relaxed commits alone never checkpoint, so their log grows by a page or more per commit; a sync
// apart checkpoints it on a connection of its own, and the writer then starts the log again, so
// with a sync apart every 100 commits the log stays far shorter than the commits made. Every
// commit is still there when the store is opened again after a kill, and a sync apart after Close
// is refused.
func TestASyncApartKeepsTheLogShort(t *testing.T) {
	ctx := context.Background()
	const commits = 1500
	for _, apart := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "loom.db")
		st, err := Open(ctx, path, Options{})
		require.NoError(t, err)
		for i := range commits {
			require.NoError(t, relaxedAppend(st, "s"))
			if apart && i%100 == 99 {
				require.NoError(t, st.SyncRelaxed(ctx))
			}
		}
		pages := walPages(t, path)
		if apart {
			require.Less(t, pages, int64(commits/3), "the log is started again after the checkpoints apart")
		} else {
			require.GreaterOrEqual(t, pages, int64(commits), "relaxed commits alone append a page or more each")
		}
		st.Kill()
		<-st.Released()
		require.ErrorIs(t, st.SyncRelaxed(ctx), store.ErrClosed)
		st, err = Open(ctx, path, Options{})
		require.NoError(t, err)
		h, err := st.Head(ctx, "s", 0)
		require.NoError(t, err)
		require.EqualValues(t, commits, h, "every relaxed commit outlives the kill")
		require.NoError(t, st.Close())
		require.ErrorIs(t, st.SyncRelaxed(ctx), store.ErrClosed)
	}
}
