package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
	"github.com/loomcheck/loomcheck/reference/store/storetest"
)

var bg = context.Background()

// openAt opens a store at path and closes it when the test ends (closing twice is harmless).
func openAt(t testing.TB, path string) *sqlite.SQLite {
	t.Helper()
	st, err := sqlite.Open(bg, path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openTemp(t testing.TB) (*sqlite.SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	return openAt(t, path), path
}

// appendKinds appends one event per kind to (stream, gen) in one transaction and returns the
// new head.
func appendKinds(t testing.TB, st store.Store, stream string, gen int64, kinds ...string) int64 {
	t.Helper()
	evs := make([]store.NewEvent, len(kinds))
	for i, k := range kinds {
		evs[i] = store.NewEvent{Kind: k, Data: []byte(`"` + k + `"`)}
	}
	var head int64
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		head, err = tx.Append(stream, gen, -1, evs...)
		return err
	}))
	return head
}

// lines renders events as "seq kind" for readable comparisons.
func lines(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d %s", e.Seq, e.Kind)
	}
	return out
}

func kindsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

func TestOpenRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("this is not a database\n", 200)), 0o600))
	st, err := sqlite.Open(bg, junk, sqlite.Options{})
	if err == nil {
		st.Close()
	}
	require.Error(t, err, "a file that is not SQLite")

	st, err = sqlite.Open(bg, filepath.Join(dir, "missing", "dir", "loom.db"), sqlite.Options{})
	if err == nil {
		st.Close()
	}
	require.Error(t, err, "a directory that does not exist")
}

// TestStore runs the store suite against SQLite: one handle at a time on one file, once reading
// everything from the database and once with every stream and key cached (Options.Cached).
func TestStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		cached func(string) bool
	}{{"uncached", nil}, {"cached", func(string) bool { return true }}} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, storetest.Backend{
				Fresh: func(t *testing.T) func(t *testing.T) store.Store {
					path := filepath.Join(t.TempDir(), "loom.db")
					return func(t *testing.T) store.Store {
						t.Helper()
						st, err := sqlite.Open(bg, path, sqlite.Options{Cached: c.cached})
						require.NoError(t, err)
						return st
					}
				},
			})
		})
	}
}
