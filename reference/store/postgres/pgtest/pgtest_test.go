package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// verdict is what a helper did to a test: skipped it, failed it, or let it go on.
type verdict struct {
	testing.TB
	skipped, failed bool
}

func (v *verdict) Helper()               {}
func (v *verdict) Skip(args ...any)      { v.skipped = true; panic(v) }
func (v *verdict) Fatal(args ...any)     { v.failed = true; panic(v) }
func (v *verdict) Fatalf(string, ...any) { v.failed = true; panic(v) }

// run calls f with a stand-in for the test and reports what f did to it.
func run(f func(testing.TB)) (v *verdict) {
	v = &verdict{}
	defer func() {
		if r := recover(); r != nil && r != v {
			panic(r)
		}
	}()
	f(v)
	return v
}

func TestRequireSkipsWithoutAServerUnlessCI(t *testing.T) {
	t.Setenv("PGHOST", "")
	t.Setenv("CI", "")
	v := run(Require)
	require.True(t, v.skipped, "no server, not CI: skipped")
	require.False(t, v.failed)

	t.Setenv("CI", "true")
	v = run(Require)
	require.True(t, v.failed, "no server in CI: failed")
	require.False(t, v.skipped)

	t.Setenv("PGHOST", "db.example")
	v = run(Require)
	require.False(t, v.skipped || v.failed, "a server: the test goes on")
}

func TestTempDatabase(t *testing.T) {
	ctx := context.Background()
	var url string
	t.Run("uses", func(t *testing.T) {
		url = TempDatabase(t)
		name, ok := strings.CutPrefix(url, "postgres:///")
		require.True(t, ok, url)
		require.Regexp(t, `^loomtest_[0-9]+_[0-9]+_[0-9a-f]{8}$`, name)
		st, err := postgres.Open(ctx, url, postgres.Options{})
		require.NoError(t, err, "the database is there")
		st.Close()
		require.NotEqual(t, url, TempDatabase(t), "every call a database of its own")
	})
	if url == "" {
		return // skipped: no server
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err == nil {
		st.Close()
	}
	require.Error(t, err, "the database was dropped when the test ended")
}
