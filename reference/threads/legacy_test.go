package threads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

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
