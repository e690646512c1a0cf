package threads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestLegacyRecordsOpenInTheTables: a store written by the engine before the record tables
// (testdata/legacy, written by writer_test.go.txt at d711b5c, its records under "thr/" keys with
// "null" for a deleted one) opens: its records move into the tables, nothing is left under the
// old keys, and the box answers what the engine that wrote it answered, then and after another
// restart.
func TestLegacyRecordsOpenInTheTables(t *testing.T) {
	ctx := context.Background()
	var want struct {
		IDs     legacyIDs       `json:"ids"`
		Answers json.RawMessage `json:"answers"`
	}
	data, err := os.ReadFile(filepath.Join("testdata", "legacy", "answers.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"loom.db", "loom.db.head", "loom.db.identity", "loom.db.clean"} {
		b, err := os.ReadFile(filepath.Join("testdata", "legacy", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := recordsConfig()
	for round := 1; round <= 2; round++ {
		b := openBox(t, dir, cfg)
		old, err := b.st.MetaPrefix(ctx, "thr/")
		if err != nil {
			t.Fatal(err)
		}
		if len(old) != 0 {
			t.Fatalf("open %d: %d records left under the old keys, first %s", round, len(old), old[0].Key)
		}
		tables, err := b.st.MetaPrefix(ctx, "tbl/")
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) == 0 {
			t.Fatalf("open %d: no records in the tables", round)
		}
		got, err := json.Marshal(observeLegacy(t, b.svc, want.IDs))
		b.close()
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, want.Answers); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, compact.Bytes()) {
			t.Fatalf("open %d: answers differ\n got %s\nwant %s", round, got, compact.Bytes())
		}
	}
}

// TestLegacyKeysOfAnUnknownKindStay: opening a store of the old layout moves what it knows (a
// connection's state), drops a deleted record (null) and leaves a key of a kind it does not know
// where it is.
func TestLegacyKeysOfAnUnknownKindStay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{"thr/conn/lab": `{"state":"paused"}`, "thr/task/tk_gone": "null", "thr/later/x": `"kept"`}
	if err := st.Update(ctx, func(tx store.Tx) error {
		for k, v := range old {
			if err := tx.PutMeta(k, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b := openBox(t, dir, recordsConfig())
	defer b.close()
	left, err := b.st.MetaPrefix(ctx, "thr/")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Key != "thr/later/x" || string(left[0].Val) != `"kept"` {
		t.Fatalf("left under the old keys: %v", left)
	}
	cv, err := b.svc.Connection(ctx, olga, "lab")
	if err != nil || cv != (threads.ConnectionView{ID: "lab", State: "paused"}) {
		t.Fatalf("connection: %+v %v", cv, err)
	}
	if _, err := b.svc.Task(ctx, dana, "tk_gone"); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("the deleted task: %v, want ErrNotFound", err)
	}
	if _, ok, err := b.st.Meta(ctx, "tbl/12:threads.task/tk_gone"); err != nil || ok {
		t.Fatalf("the deleted task is stored in its table: %v %v", ok, err)
	}
}
