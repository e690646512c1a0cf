package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keptFor counts the killed stores kept for the database at path.
func keptFor(path string) int {
	keptMu.Lock()
	defer keptMu.Unlock()
	n := 0
	for _, k := range keptStores {
		if k.path == path {
			n++
		}
	}
	return n
}

// walHeader is the first 32 bytes of the write-ahead log: SQLite's format gives a log started
// again a new checkpoint sequence number and new salts there.
func walHeader(t *testing.T, path string) []byte {
	t.Helper()
	b := mustRead(t, path+"-wal")
	require.GreaterOrEqual(t, len(b), 32, "a log with its header")
	return b[:32]
}

func killed(t *testing.T, path string, commits int) {
	t.Helper()
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	for i := range commits {
		require.NoError(t, appendTo(st, "s", int64(i), nil))
	}
	st.Kill()
	<-st.Released()
}

// A kill leaves the write-ahead log as a crash does, and the next Open goes on writing it.
func TestAKillLeavesTheLogToTheNextOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	killed(t, path, 3)
	require.Equal(t, 1, keptFor(path), "the killed store's connection is kept")
	head := walHeader(t, path)
	size := int64(len(mustRead(t, path+"-wal")))

	st, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.Zero(t, keptFor(path), "the next Open let go of it")
	require.NoError(t, appendTo(st, "s", 3, nil))
	require.Equal(t, head, walHeader(t, path), "the first commit after the kill goes on in the same log")
	require.Greater(t, int64(len(mustRead(t, path+"-wal"))), size, "appended to it")
	h, err := st.Head(ctx, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, h)
	require.NoError(t, st.Close())
	_, err = os.Stat(path + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "a clean close still folds the log in and deletes it")
}

// Files written behind SQLite's back after the kill are not read through the kept connection's
// view of the log: it is closed before the next Open reads anything.
func TestAKeptConnectionIsDroppedWhenTheFilesChanged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	killed(t, path, 2)
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(path+"-wal", later, later))
	st, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.Zero(t, keptFor(path))
	h, err := st.Head(ctx, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, h)
	require.NoError(t, st.Close())
}

// takeKept hands over no kept connection whose files changed after the kill, whether the log or
// the database changed: the next Open then starts from the files alone.
func TestAChangedFileIsNotHandedOver(t *testing.T) {
	for _, changed := range []string{"-wal", ""} {
		path := filepath.Join(t.TempDir(), "loom.db")
		killed(t, path, 2)
		later := time.Now().Add(time.Hour)
		require.NoError(t, os.Chtimes(path+changed, later, later))
		require.Nil(t, takeKept(path), "the file %q changed", "loom.db"+changed)
		require.Zero(t, keptFor(path))
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	killed(t, path, 2)
	k := takeKept(path)
	require.NotNil(t, k, "files as the kill left them are handed over")
	require.NoError(t, k.w.Close())
}

// Killed stores never opened again are bounded, and ReleaseKilled lets go of them all.
func TestKeptConnectionsAreBounded(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range maxKept + 2 {
		p := filepath.Join(dir, string(rune('a'+i))+".db")
		killed(t, p, 1)
		paths = append(paths, p)
	}
	require.Zero(t, keptFor(paths[0]), "the oldest is closed")
	require.Zero(t, keptFor(paths[1]))
	require.Equal(t, 1, keptFor(paths[len(paths)-1]))
	keptMu.Lock()
	n := len(keptStores)
	keptMu.Unlock()
	require.LessOrEqual(t, n, maxKept)
	ReleaseKilled()
	require.Zero(t, keptFor(paths[len(paths)-1]))
}

// A kept connection whose files were deleted after the kill is closed by the next Open of the
// path, before it creates the new store, which then works as any other.
func TestAKeptConnectionLeavesANewStoreAlone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	killed(t, path, 2)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
	}
	st, err := Open(ctx, path, Options{AllowEmpty: true})
	require.NoError(t, err)
	require.Zero(t, keptFor(path), "another file now: not handed over, closed")
	require.NoError(t, appendTo(st, "n", 0, nil))
	require.NoError(t, appendTo(st, "n", 1, nil))
	require.NoError(t, st.Close())
	st, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	h, err := st.Head(ctx, "n", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, h)
	h, err = st.Head(ctx, "s", 0)
	require.NoError(t, err)
	require.Zero(t, h, "nothing of the deleted store")
	require.NoError(t, st.Close())
}

// A kept connection closed as the last one deletes no file by name: the path may name another
// store's files by then.
func TestAKeptConnectionDeletesNoFileWhenItCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	killed(t, path, 2)
	require.Equal(t, 1, keptFor(path))
	ReleaseKilled()
	require.Zero(t, keptFor(path))
	_, err := os.Stat(path + "-wal")
	require.NoError(t, err, "the log is still there")
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	h, err := st.Head(context.Background(), "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, h)
	require.NoError(t, st.Close())
}
