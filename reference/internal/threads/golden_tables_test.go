package threads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// The golden tables pin the on-disk shape of the service's record tables: every stored key and
// value of the kernel's tables (and their versions) after the records of writeRecords, checked in
// under testdata/golden-tables. The test loads them, as they are, into a new store, opens the box
// on it and expects the answers the box gave when they were written, and the stored tables
// unchanged by the opening and the reading. A renamed table, key or record member fails it, not
// the stores already written.
//
// Regenerate (only when the shape is meant to change, with a migration for what was written
// before): go test ./reference/internal/threads/ -run TestGoldenTables -rewrite (the one flag of
// reference/internal/transcript).
const goldenTablesPath = "testdata/golden-tables/threads.json"

type goldenTables struct {
	IDs legacyIDs `json:"ids"`
	// Stored is every metadata pair of the tables, by key, values as stored.
	Stored  []goldenPair    `json:"stored"`
	Answers json.RawMessage `json:"answers"`
}

type goldenPair struct {
	Key string          `json:"key"`
	Val json.RawMessage `json:"val"`
}

// tablePairs reads every stored pair of the kernel's record tables and their versions.
func tablePairs(t *testing.T, st store.Store) []goldenPair {
	t.Helper()
	kvs, err := st.MetaPrefix(context.Background(), "tbl")
	if err != nil {
		t.Fatal(err)
	}
	out := []goldenPair{}
	for _, kv := range kvs {
		out = append(out, goldenPair{Key: kv.Key, Val: json.RawMessage(kv.Val)})
	}
	return out
}

func TestGoldenTables(t *testing.T) {
	if transcript.Rewrite() {
		b := openBox(t, t.TempDir(), recordsConfig())
		ids := writeRecords(t, b)
		answers, err := json.Marshal(observeLegacy(t, b.svc, ids))
		if err != nil {
			t.Fatal(err)
		}
		g := goldenTables{IDs: ids, Stored: tablePairs(t, b.st), Answers: answers}
		b.close()
		data, err := json.MarshalIndent(g, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenTablesPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenTablesPath, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(goldenTablesPath)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenTables
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, p := range g.Stored {
			var val bytes.Buffer // the file indents the values; the store holds them compact
			if err := json.Compact(&val, p.Val); err != nil {
				return err
			}
			if err := tx.PutMeta(p.Key, val.Bytes()); err != nil {
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
	got, err := json.Marshal(observeLegacy(t, b.svc, g.IDs))
	stored := tablePairs(t, b.st)
	b.close()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, g.Answers); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("answers differ\n got %s\nwant %s", got, want.Bytes())
	}
	gotStored, _ := json.Marshal(stored)
	wantStored, _ := json.Marshal(g.Stored)
	if !bytes.Equal(gotStored, wantStored) {
		t.Fatalf("the stored tables changed on opening and reading\n got %s\nwant %s", gotStored, wantStored)
	}
}
