package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Syncs apart from the writer (store.RelaxedSync). A relaxed commit leaves the write-ahead log
// unsynced and, while the writer's connection commits relaxed, nothing checkpoints it (relaxed.go),
// so a store whose commits are all relaxed would see its log grow without end. SyncRelaxed does
// both jobs off the writer's path: on a connection of its own it checkpoints the log (PASSIVE:
// it copies what no reader still needs into the database and syncs both, and never waits for the
// writer), then syncs the log and the database files. The writer starts the log again from its
// beginning once a checkpoint copied all of it, so the log stays about as long as the frames
// between two syncs, and its pages are written again rather than added.
//
// Every relaxed commit that returned before the call was written to the log before it (or, once
// copied by a checkpoint, to the database, which the checkpoint syncs before the log may start
// again), so the syncs make it durable; a commit written meanwhile is kept whole or lost whole on a
// crash, since SQLite checks the log's frames when it reads the log back. The head file is left as
// it is (it may stay behind, which is allowed).

// SyncRelaxed implements store.RelaxedSync; see above. Syncs apart run one at a time; Close and
// Kill wait for the one in progress, and none runs after them.
//
// Errors: store.ErrClosed once the store is closed or killed; ctx's error; the checkpoint's and
// the syncs' errors.
//
//	err := st.SyncRelaxed(ctx)
func (s *SQLite) SyncRelaxed(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.apartMu.Lock()
	defer s.apartMu.Unlock()
	if s.shut.Load() {
		return store.ErrClosed
	}
	if s.apart == nil {
		db, err := sql.Open("sqlite", writerDSN(s.path, Options{SyncNormal: s.normal}))
		if err != nil {
			return fmt.Errorf("store: open the checkpointer of %s: %w", s.path, err)
		}
		db.SetMaxOpenConns(1)
		s.apart = db
	}
	if _, err := s.apart.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return fmt.Errorf("store: checkpoint %s: %w", s.path, err)
	}
	return syncFiles(s.path+"-wal", s.path)
}

// closeApart waits for the sync apart in progress and closes its connection; the store is shut
// already, so none begins after it.
func (s *SQLite) closeApart() error {
	s.apartMu.Lock()
	defer s.apartMu.Unlock()
	if s.apart == nil {
		return nil
	}
	err := s.apart.Close()
	s.apart = nil
	return err
}

// syncFiles syncs each file of paths that exists, in order.
func syncFiles(paths ...string) error {
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return err
		}
	}
	return nil
}
