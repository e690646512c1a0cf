package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// raw runs statements on the database file through a connection of its own, outside the store
// (and, dropping the append-only trigger first, around it): what a failing disk or a careless
// hand does.
func raw(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	for _, q := range stmts {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
}

// fill writes two streams, a metadata key and a remembered key, and closes the store cleanly.
func fill(t *testing.T, path string) {
	t.Helper()
	st, err := sqlite.Open(bg, path, sqlite.Options{})
	require.NoError(t, err)
	appendKinds(t, st, "a", 0, "k1", "k2", "k3")
	appendKinds(t, st, "b", 1, "x1", "x2")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("exec/a", []byte(`{"state":"open"}`)); err != nil {
			return err
		}
		_, err := tx.Remember("dedupe/a", "alice|m-1", 10)
		return err
	}))
	require.NoError(t, st.Close())
}

func requireCorrupt(t *testing.T, err error, table string) *store.CorruptError {
	t.Helper()
	require.ErrorIs(t, err, store.ErrCorrupt)
	var ce *store.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, table, ce.Table, "%v", err)
	return ce
}

func TestAFlippedRecordIsRefusedOnEveryRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	fill(t, path)
	st := openAt(t, path)
	// The data of a:0:2 changes under the open store, as a failing disk would change it: the
	// check at Open is past, the reads must find it.
	raw(t, path, `DROP TRIGGER events_append_only_u`,
		`UPDATE events SET data = CAST('"k3"' AS BLOB) WHERE stream = 'a' AND seq = 2`)

	_, err := st.ReadForward(bg, "a", 0, 0, 10)
	ce := requireCorrupt(t, err, "events")
	require.Equal(t, [3]any{"a", int64(0), int64(2)}, [3]any{ce.Stream, ce.Gen, ce.Seq})
	_, err = st.ReadBackward(bg, "a", 0, 100, 10)
	requireCorrupt(t, err, "events")
	_, err = st.ReadForward(bg, "a", 0, 1, 1)
	requireCorrupt(t, err, "events")
	// What is not damaged reads as before, whole.
	evs, err := st.ReadForward(bg, "a", 0, 2, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"3 k3"}, lines(evs))
	evs, err = st.ReadForward(bg, "b", 1, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"1 x1", "2 x2"}, lines(evs))
}

func TestEveryColumnOfARecordIsSummed(t *testing.T) {
	for _, set := range []string{
		`kind = 'k9'`, `time = time + 1`, `seq = 7`, `stream = 'c'`, `gen = 5`, `sum = sum + 1`, `sum = NULL`, `data = NULL`,
	} {
		t.Run(set, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loom.db")
			fill(t, path)
			st := openAt(t, path)
			raw(t, path, `DROP TRIGGER events_append_only_u`, `UPDATE events SET `+set+` WHERE stream = 'a' AND seq = 3`)
			stream, gen := "a", int64(0)
			switch set {
			case `stream = 'c'`:
				stream = "c"
			case `gen = 5`:
				gen = 5
			}
			_, err := st.ReadForward(bg, stream, gen, 0, 10)
			requireCorrupt(t, err, "events")
			require.NoError(t, st.Close())
			_, err = sqlite.Open(bg, path, sqlite.Options{})
			requireCorrupt(t, err, "events") // and the next Open refuses, however it was closed
		})
	}
}

func TestFlippedMetadataAndRememberedKeysAreRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	fill(t, path)
	st := openAt(t, path)
	raw(t, path, `UPDATE meta SET val = CAST('{"state":"clsd"}' AS BLOB) WHERE key = 'exec/a'`,
		`UPDATE remembered SET n = 9 WHERE key = 'alice|m-1'`)
	_, _, err := st.Meta(bg, "exec/a")
	requireCorrupt(t, err, "meta")
	_, err = st.MetaPrefix(bg, "exec/")
	requireCorrupt(t, err, "meta")
	err = st.Update(bg, func(tx store.Tx) error {
		_, _, err := tx.Meta("exec/a")
		return err
	})
	requireCorrupt(t, err, "meta")
	err = st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Remember("dedupe/a", "alice|m-1", 10)
		return err
	})
	requireCorrupt(t, err, "remembered")
}

// A remembered key whose own bytes change is not found by the lookup at all (no checksum of it is
// ever read there): the check at Open, which reads every row, is what refuses it.
func TestAStoreClosedCleanlyIsCheckedAtOpenToo(t *testing.T) {
	for name, stmt := range map[string]string{
		"a remembered key": `UPDATE remembered SET key = 'alice|m-2'`,
		"an event's key":   `UPDATE events SET stream = 'z' WHERE stream = 'a' AND seq = 3`,
		"metadata":         `UPDATE meta SET val = CAST('{}' AS BLOB)`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loom.db")
			fill(t, path)
			raw(t, path, `DROP TRIGGER events_append_only_u`, stmt)
			_, err := sqlite.Open(bg, path, sqlite.Options{})
			require.ErrorIs(t, err, store.ErrCorrupt)
		})
	}
}

func TestOpenAfterAnUncleanShutdownChecksEverything(t *testing.T) {
	for name, stmts := range map[string][]string{
		"event data": {`DROP TRIGGER events_append_only_u`, `UPDATE events SET data = CAST('"kX"' AS BLOB) WHERE stream = 'b' AND seq = 2`},
		"a gap":      {`DROP TRIGGER events_append_only_d`, `DELETE FROM events WHERE stream = 'a' AND seq = 2`},
		"metadata":   {`UPDATE meta SET sum = sum + 1`},
		"remembered": {`UPDATE remembered SET scope = 'dedupe/b'`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loom.db")
			st, err := sqlite.Open(bg, path, sqlite.Options{})
			require.NoError(t, err)
			appendKinds(t, st, "a", 0, "k1", "k2", "k3")
			appendKinds(t, st, "b", 0, "x1", "x2")
			require.NoError(t, st.Update(bg, func(tx store.Tx) error {
				if err := tx.PutMeta("exec/a", []byte(`{}`)); err != nil {
					return err
				}
				_, err := tx.Remember("dedupe/a", "alice|m-1", 10)
				return err
			}))
			st.Kill() // no clean shutdown recorded
			<-st.Released()
			raw(t, path, stmts...)
			_, err = sqlite.Open(bg, path, sqlite.Options{})
			require.ErrorIs(t, err, store.ErrCorrupt)
		})
	}
}

// crashImage writes a store the way a killed process leaves it: the newest commits only in the
// write-ahead log. A second connection holds the database open while the store dies, so that
// closing the store's own connections cannot fold the log into the database; the files are then
// copied as they are, as a crash leaves them.
func crashImage(t *testing.T, commits int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(bg, src, sqlite.Options{})
	require.NoError(t, err)
	hold, err := sql.Open("sqlite", "file:"+src)
	require.NoError(t, err)
	defer hold.Close()
	var n int
	require.NoError(t, hold.QueryRow(`SELECT count(*) FROM events`).Scan(&n))
	for i := range commits {
		appendKinds(t, st, "a", 0, fmt.Sprintf("k%d", i+1))
	}
	st.Kill()
	<-st.Released()
	dst := filepath.Join(t.TempDir(), "loom.db")
	for _, suffix := range []string{"", "-wal", ".identity", ".head"} {
		b, err := os.ReadFile(src + suffix)
		require.NoError(t, err, suffix)
		require.NoError(t, os.WriteFile(dst+suffix, b, 0o600))
	}
	return dst
}

func TestACrashImageOpensWhole(t *testing.T) {
	path := crashImage(t, 6)
	st := openAt(t, path)
	evs, err := st.ReadForward(bg, "a", 0, 0, 100)
	require.NoError(t, err)
	require.Equal(t, []string{"1 k1", "2 k2", "3 k3", "4 k4", "5 k5", "6 k6"}, lines(evs))
}

func TestAWriteAheadLogWithAFlippedByteIsRefused(t *testing.T) {
	path := crashImage(t, 6)
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.Greater(t, len(wal), 3*4120, "the commits are in the log")
	for _, off := range []int{20, 40, 100, 4200, 8300} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			damaged := append([]byte(nil), wal...)
			damaged[off] ^= 0x01
			require.NoError(t, os.WriteFile(path+"-wal", damaged, 0o600))
			_, err := sqlite.Open(bg, path, sqlite.Options{})
			requireCorrupt(t, err, "wal")
		})
	}
}

// TestAWriteAheadLogHeaderDamagedBeforeOneFrameIsRefused: a log whose header checksum does not
// match is taken for a torn header only when no whole frame follows it; with exactly one frame
// after it, the log is damaged and refused.
func TestAWriteAheadLogHeaderDamagedBeforeOneFrameIsRefused(t *testing.T) {
	path := crashImage(t, 6)
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.Greater(t, len(wal), 32+4120)
	damaged := append([]byte(nil), wal[:32+4120]...)
	damaged[24] ^= 0x01 // the header's checksum
	require.NoError(t, os.WriteFile(path+"-wal", damaged, 0o600))
	_, err = sqlite.Open(bg, path, sqlite.Options{})
	requireCorrupt(t, err, "wal")
}

func TestATruncatedWriteAheadLogIsRefused(t *testing.T) {
	path := crashImage(t, 6)
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	// Cut at a frame boundary: what SQLite reads is a valid, shorter log. Only the head file
	// tells that commits were acknowledged past it.
	frames := (len(wal) - 32) / 4120
	require.NoError(t, os.WriteFile(path+"-wal", wal[:32+(frames-2)*4120], 0o600))
	_, err = sqlite.Open(bg, path, sqlite.Options{})
	requireCorrupt(t, err, "events")
}

// TestAWriteAheadLogCutShortIsRefusedWithoutItsSideFiles cuts the log of a crashed store at
// several points, with the head file, the identity file, both or neither lost beside it: the
// store never opens as the shorter past SQLite would read, whatever record of the count is left.
func TestAWriteAheadLogCutShortIsRefusedWithoutItsSideFiles(t *testing.T) {
	const commits = 60
	for _, cut := range []string{"25%", "50%", "75%", "two frames"} {
		for _, lost := range [][]string{nil, {".head"}, {".identity"}, {".head", ".identity"}} {
			t.Run(fmt.Sprintf("%s/lost%v", cut, lost), func(t *testing.T) {
				path := crashImage(t, commits)
				wal, err := os.ReadFile(path + "-wal")
				require.NoError(t, err)
				frames := (len(wal) - 32) / 4120
				n := map[string]int{"25%": len(wal) / 4, "50%": len(wal) / 2, "75%": len(wal) * 3 / 4,
					"two frames": 32 + (frames-2)*4120}[cut]
				require.NoError(t, os.WriteFile(path+"-wal", wal[:n], 0o600))
				for _, suffix := range lost {
					require.NoError(t, os.Remove(path+suffix))
				}
				st, err := sqlite.Open(bg, path, sqlite.Options{})
				if err == nil {
					evs, _ := st.ReadForward(bg, "a", 0, 0, 100)
					st.Close()
					t.Fatalf("the store opened with %d of its %d events", len(evs), commits)
				}
				require.ErrorIs(t, err, store.ErrCorrupt, "%v", err)
				// Refused again: the first refusal left nothing that lets the next Open through.
				_, err = sqlite.Open(bg, path, sqlite.Options{})
				require.ErrorIs(t, err, store.ErrCorrupt)
			})
		}
	}
}

// A crashed store whose identity file alone was lost opens whole (its head file still vouches for
// the count); one whose head file was lost is refused even whole, since nothing is left to tell a
// whole log from a shorter one, and a restore of its backup brings it back.
func TestACrashImageWithoutOneSideFile(t *testing.T) {
	path := crashImage(t, 6)
	require.NoError(t, os.Remove(path+".identity"))
	st := openAt(t, path)
	evs, err := st.ReadForward(bg, "a", 0, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 6)
	require.NoError(t, st.Close())

	path = crashImage(t, 6)
	require.NoError(t, os.Remove(path+".head"))
	_, err = sqlite.Open(bg, path, sqlite.Options{})
	requireCorrupt(t, err, "head")
	backup := filepath.Join(t.TempDir(), "backup.db")
	require.NoError(t, sqlite.BackupFile(bg, path, backup))
	restored := filepath.Join(t.TempDir(), "loom.db")
	require.NoError(t, sqlite.Restore(bg, backup, restored))
	st = openAt(t, restored)
	evs, err = st.ReadForward(bg, "a", 0, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 6)
}

func TestADeletedDatabaseIsRefusedUnlessAllowed(t *testing.T) {
	for _, gone := range []string{"the file", "its contents"} {
		t.Run(gone, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loom.db")
			fill(t, path)
			if gone == "the file" {
				require.NoError(t, os.Remove(path))
			} else {
				require.NoError(t, os.Remove(path))
				st, err := sqlite.Open(bg, path+".other", sqlite.Options{})
				require.NoError(t, err)
				require.NoError(t, st.Close())
				require.NoError(t, os.Rename(path+".other", path))
			}
			_, err := sqlite.Open(bg, path, sqlite.Options{})
			require.ErrorIs(t, err, store.ErrMissing)
			st, err := sqlite.Open(bg, path, sqlite.Options{AllowEmpty: true})
			require.NoError(t, err)
			h, err := st.Head(bg, "a", 0)
			require.NoError(t, err)
			require.Zero(t, h)
			require.NoError(t, st.Close())
		})
	}
}

// v0Schema is the schema of a store written before checksums (schema version 0): the golden
// layout a migration starts from.
const v0Schema = `
CREATE TABLE events (stream TEXT NOT NULL, gen INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
	data BLOB, time INTEGER NOT NULL, PRIMARY KEY (stream, gen, seq)) WITHOUT ROWID;
CREATE TRIGGER events_append_only_u BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_append_only_d BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TABLE meta (key TEXT PRIMARY KEY, val BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE remembered (scope TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID;
CREATE INDEX remembered_n ON remembered (scope, n);
INSERT INTO events VALUES ('a', 0, 1, 'started', CAST('{"flow":"dialogue"}' AS BLOB), 1700000000000);
INSERT INTO events VALUES ('a', 0, 2, 'consumed', CAST('{"m":1}' AS BLOB), 1700000000001);
INSERT INTO meta VALUES ('exec/a', CAST('{"state":"open"}' AS BLOB));
INSERT INTO remembered VALUES ('dedupe/a', 'alice|m-1', 1);
`

func TestAStoreWrittenBeforeChecksumsIsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	raw(t, path, v0Schema)
	st, err := sqlite.Open(bg, path, sqlite.Options{})
	require.NoError(t, err)
	evs, err := st.ReadForward(bg, "a", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"1 started", "2 consumed"}, lines(evs))
	require.Equal(t, `{"flow":"dialogue"}`, string(evs[0].Data))
	v, ok, err := st.Meta(bg, "exec/a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, `{"state":"open"}`, string(v))
	var fresh bool
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember("dedupe/a", "alice|m-1", 10)
		return err
	}))
	require.False(t, fresh, "the remembered key survives the migration")
	_, err = st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err, "the migrated store has the leases table")
	require.NoError(t, st.Close())
	// The migration kept the table append-only and summed every row: a later change is found.
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE events SET kind = 'x'`)
	require.Error(t, err, "the append-only trigger is back")
	var indexes []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'remembered' AND sql IS NOT NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, indexes, "the index by number is dropped: the sweep reads the primary key")
	db.Close()
	raw(t, path, `DROP TRIGGER events_append_only_u`, `UPDATE events SET kind = 'x' WHERE seq = 2`)
	_, err = sqlite.Open(bg, path, sqlite.Options{})
	requireCorrupt(t, err, "events")
}

func TestBackupWhileWritingThenRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live", "loom.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	st := openAt(t, path)
	appendKinds(t, st, "a", 0, kindsN("k", 50)...)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = st.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("b", 0, -1, store.NewEvent{Kind: fmt.Sprint(i)})
				return err
			})
		}
	}()
	require.Eventually(t, func() bool {
		h, err := st.Head(bg, "b", 0)
		return err == nil && h >= 20
	}, 10*time.Second, time.Millisecond, "the writer is writing when the backup starts")
	backup := filepath.Join(dir, "backup.db")
	require.NoError(t, st.Backup(bg, backup))
	close(stop)
	wg.Wait()
	require.Error(t, st.Backup(bg, backup), "a backup never overwrites a file")

	restored := filepath.Join(dir, "restored", "loom.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(restored), 0o700))
	require.NoError(t, sqlite.Restore(bg, backup, restored))
	require.Error(t, sqlite.Restore(bg, backup, restored), "a restore never replaces a store")
	rs := openAt(t, restored)
	want, err := st.ReadForward(bg, "a", 0, 0, 100)
	require.NoError(t, err)
	got, err := rs.ReadForward(bg, "a", 0, 0, 100)
	require.NoError(t, err)
	require.Equal(t, want, got)
	// The copy is of one instant: a whole prefix of the writer's stream, without a gap.
	bs, err := rs.ReadForward(bg, "b", 0, 0, store.MaxRead)
	require.NoError(t, err)
	for i, e := range bs {
		require.Equal(t, int64(i+1), e.Seq)
		require.Equal(t, fmt.Sprint(i), e.Kind)
	}
}

func TestARestoreOfADamagedBackupIsRefused(t *testing.T) {
	dir := t.TempDir()
	st := openAt(t, filepath.Join(dir, "loom.db"))
	appendKinds(t, st, "a", 0, "k1", "k2")
	backup := filepath.Join(dir, "backup.db")
	require.NoError(t, st.Backup(bg, backup))
	raw(t, backup, `DROP TRIGGER events_append_only_u`, `UPDATE events SET kind = 'kX' WHERE seq = 2`)
	restored := filepath.Join(dir, "restored", "loom.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(restored), 0o700))
	err := sqlite.Restore(bg, backup, restored)
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, statErr := os.Stat(restored)
	require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing of a refused restore is left")
}
