package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// A killed store does not close its writer's connection: closing the last connection to a
// database makes SQLite fold the write-ahead log into the database and delete it, which a
// crashed process never does, and which costs the next Open a new log (and the sync of its
// header at the first commit). The connection is kept instead, idle, refused to every caller
// since the kill, and the next Open of the same file in this process closes it once its own
// first connection is open: it is then not the last, and the log stays as a crash leaves it.
//
// The kept connection is told to keep the log when it closes (SQLite's persistent log), so that
// closing it, whenever that happens, deletes nothing by name: the path may name other files by
// then (SQLite itself leaves a database unlinked or renamed since alone; the persistent log
// covers one written over in place). It is closed:
//   - by the next Open of the same file (the same inode), after that Open's first connection;
//   - by an Open of the same path that finds another file there, or none, before it opens it;
//   - first, before that Open touches anything, when the database or its log changed since the
//     kill (written behind SQLite's back): its view of the log would no longer match the file;
//   - when more than maxKept killed stores are kept in the process (the oldest);
//   - by ReleaseKilled.

// maxKept bounds the killed stores whose connections the process keeps.
const maxKept = 8

// kept is a killed store's writer, its connection idle, and what its files were at the kill.
type kept struct {
	path    string
	w       *sql.DB
	db, wal os.FileInfo // wal is nil when there was no log
}

var keptMu sync.Mutex
var keptStores []*kept // oldest first, under keptMu

// keep adds k, closing the oldest kept store when there are more than maxKept.
func keep(k *kept) {
	keptMu.Lock()
	defer keptMu.Unlock()
	keptStores = append(keptStores, k)
	for len(keptStores) > maxKept {
		_ = keptStores[0].w.Close()
		keptStores = keptStores[1:]
	}
}

// takeKept removes and returns the store kept for the database at path, nil when none is. When
// the files changed since the kill it closes that store's connection and returns nil; so it does
// for stores kept for path whose database is no longer the one there (deleted or replaced since).
// It holds keptMu while closing, so that an Open of the file waits until nothing else writes to it.
func takeKept(path string) *kept {
	db, err := os.Stat(path)
	keptMu.Lock()
	defer keptMu.Unlock()
	keptStores = slices.DeleteFunc(keptStores, func(k *kept) bool {
		stale := k.path == path && (err != nil || !os.SameFile(k.db, db))
		if stale {
			_ = k.w.Close()
		}
		return stale
	})
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(keptStores, func(k *kept) bool { return os.SameFile(k.db, db) })
	if i < 0 {
		return nil
	}
	k := keptStores[i]
	keptStores = slices.Delete(keptStores, i, i+1)
	if !k.unchanged(db) {
		_ = k.w.Close()
		return nil
	}
	return k
}

// unchanged reports whether the database (whose file is now db) and its log are as they were at
// the kill.
func (k *kept) unchanged(db os.FileInfo) bool {
	if !sameState(k.db, db) {
		return false
	}
	wal, err := os.Stat(k.path + "-wal")
	if err != nil {
		return k.wal == nil && errors.Is(err, os.ErrNotExist)
	}
	return k.wal != nil && sameState(k.wal, wal)
}

func sameState(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// putBack keeps k again (an Open that took it failed before its first connection was open).
func (k *kept) putBack() {
	if k != nil {
		keep(k)
	}
}

// close closes the kept connection (nil: nothing kept).
func (k *kept) close() {
	if k != nil {
		_ = k.w.Close()
	}
}

// ReleaseKilled closes the connections that killed SQLite stores of this process keep for the
// next Open of their files (see Kill). Closing the last connection to a database folds its
// write-ahead log into it, as SQLite does at a clean close; the log file itself is kept.
//
//	st.Kill()
//	<-st.Released()
//	sqlite.ReleaseKilled() // no Open of this file follows
func ReleaseKilled() {
	keptMu.Lock()
	defer keptMu.Unlock()
	for _, k := range keptStores {
		_ = k.w.Close()
	}
	keptStores = nil
}

// keepWriter lets go of the killed store's writer statements and head files and keeps its
// connection for the next Open (see kept). Where it cannot, it closes the writer as before.
func (s *SQLite) keepWriter() {
	if err := s.keepLog(); err != nil {
		_ = s.closeWriter()
		return
	}
	_ = errors.Join(s.ws.close(), s.wc.Close())
	for _, f := range []*os.File{s.newestF, s.head} {
		if f != nil {
			_ = f.Close()
		}
	}
	db, err := os.Stat(s.path)
	if err != nil {
		_ = s.w.Close()
		return
	}
	k := &kept{path: s.path, w: s.w, db: db}
	if wal, err := os.Stat(s.path + "-wal"); err == nil {
		k.wal = wal
	}
	keep(k)
}

// keepLog tells the writer's connection to keep the write-ahead log when it closes.
func (s *SQLite) keepLog() error {
	return s.wc.Raw(func(dc any) error {
		fc, ok := dc.(interface {
			FileControlPersistWAL(string, int) (int, error)
		})
		if !ok {
			return fmt.Errorf("the driver's connection (%T) cannot keep the log", dc)
		}
		_, err := fc.FileControlPersistWAL("main", 1)
		return err
	})
}
