package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Damage that only the check in the background meets (no read touched it) is recorded beside the
// database as well: the next Open checks the whole store and refuses it before serving anything,
// rather than serving it again until the check finds the damage anew.
func TestDamageFoundInTheBackgroundIsRecordedForTheNextOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	rawExec(t, path, `UPDATE events SET data = CAST('"datb"' AS BLOB) WHERE stream = 's-020' AND seq = 3`)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err, "Open reads no event")
	<-st.CheckDone()
	require.False(t, st.CheckPassed())
	_, err = st.ReadForward(ctx, "s-021", 0, 0, 10)
	requireTable(t, err, "events")
	require.NoError(t, st.Close())
	_, err = os.Stat(damagedPath(path))
	require.NoError(t, err, "the damage the background check found is recorded")

	_, err = Open(ctx, path, lazyOptions)
	ce := requireTable(t, err, "events")
	require.Equal(t, "s-020", ce.Stream, "the next Open checks the whole store")
}

// A commit lost that the newest file cannot show (the tail of a stream other than the newest
// commit's, gone without a gap) is found by the check in the background, which counts the events
// against the head file: one event fewer than acknowledged is commits lost.
func TestOneEventLostBehindTheNewestIsFoundInTheBackground(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	// The newest file names one event of the last commit, whichever: the lost one is another
	// stream's.
	nb, err := os.ReadFile(newestPath(path))
	require.NoError(t, err)
	_, named, ok := parseNewest(nb)
	require.True(t, ok)
	lost := "s-010"
	if named.k.stream == lost {
		lost = "s-011"
	}
	rawExec(t, path, `DROP TRIGGER IF EXISTS events_append_only_d`, `DELETE FROM events WHERE stream = '`+lost+`' AND seq = 5`)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err, "the newest commit's event is there")
	defer st.Close()
	<-st.CheckDone()
	require.False(t, st.CheckPassed(), "249 events where 250 were acknowledged")
	_, err = st.ReadForward(ctx, "s-001", 0, 0, 10)
	ce := requireTable(t, err, "events")
	require.Contains(t, ce.Reason, "commits were lost")
}

// A remembered row whose scope bytes changed sits beside its old scope, where the scope's first
// lookup meets it: the lookup refuses the scope rather than take the key as new (a message
// delivered twice).
func TestARememberedRowMovedBesideItsScopeIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	rawExec(t, path, `UPDATE remembered SET scope = 'dedupe/a0' WHERE scope = 'dedupe/a'`)
	holdCheck(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	defer st.Close()
	var fresh bool
	err = st.Update(ctx, func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember("dedupe/a", "alice|m-1", 10)
		return err
	})
	requireTable(t, err, "remembered")
	require.False(t, fresh, "the key is not taken as new")
}
