package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// Stream names of any bytes, and too long for a notification's payload, still wake the
// subscribers of another handle (the payload is then a digest of the name), and only theirs.
func TestWakeUpsForAnyStreamName(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	long := strings.Repeat("x/very-long-execution-id-", 400)
	names := []string{"plain", "sg/id\x1fname", "nul\x00inside", "bad utf-8 \xff\xfe", "é and ü", long, long + "2"}
	for _, n := range names {
		if len(n) > 8000 || (strings.IndexByte(n, 0) >= 0 || strings.IndexByte(n, 0xff) >= 0) {
			require.True(t, strings.HasPrefix(postgres.PayloadOf(n), "#sha256:"), "%q is sent as a digest", n[:min(len(n), 20)])
		}
	}
	chans := make([]<-chan struct{}, len(names))
	for i, n := range names {
		ch, cancel := b.Subscribe(n)
		defer cancel()
		chans[i] = ch
	}
	for i, n := range names {
		appendKinds(t, a, n, 0, "e")
		woken(t, chans[i], fmt.Sprintf("stream %d", i))
		for j := range names {
			if j != i {
				require.False(t, received(chans[j]), "a commit to stream %d woke the subscriber of stream %d", i, j)
			}
		}
		evs, err := b.ReadForward(bg, n, 0, 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, n, evs[0].Stream)
	}
}

// A handle wakes its own subscribers of its own commits once, before Update returns: the
// notification the commit also sends, which comes back to the handle's listener, wakes nobody a
// second time.
func TestOwnCommitsWakeOnce(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	mine, cancel := a.Subscribe("s")
	defer cancel()
	theirs, cancelTheirs := b.Subscribe("s")
	defer cancelTheirs()
	for i := range 3 {
		appendKinds(t, a, "s", 0, fmt.Sprint(i))
		require.True(t, received(mine), "woken before Update returned")
		woken(t, theirs, "the other handle, through the notification")
		notWoken(t, mine, "woken a second time by the handle's own notification")
	}
}

// LISTEN/NOTIFY is only the wake-up: when the listening connection is lost, the store
// reconnects and wakes every subscriber once, so that a commit announced while nobody listened
// costs one read, never an event; then notifications flow again.
func TestLostListenerWakesEverySubscriber(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	chS, cancelS := b.Subscribe("s")
	defer cancelS()
	chT, cancelT := b.Subscribe("t")
	defer cancelT()
	mine, cancelMine := a.Subscribe("s")
	defer cancelMine()

	pid := b.ListenerPID()
	require.NotZero(t, pid)
	var ok bool
	require.NoError(t, raw(t, url).QueryRow(bg, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok))
	require.True(t, ok)
	woken(t, chS, "a subscriber of s after the listener was lost")
	woken(t, chT, "a subscriber of t, which nothing was appended to")
	require.NotEqual(t, pid, b.ListenerPID(), "listening again on a new connection")
	require.False(t, received(mine), "the other handle's listener was not lost")

	// Listening again: a commit of the other handle wakes the subscriber, once.
	appendKinds(t, a, "s", 0, "after")
	woken(t, chS, "a commit after the reconnection")
	notWoken(t, chS, "woken once")
	require.False(t, received(chT))

	// Lost again, several times, while commits go on: a reader that reads after every wake-up
	// still sees the last commit.
	for i := range 3 {
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT pg_terminate_backend($1)`, int32(b.ListenerPID())).Scan(&ok))
		appendKinds(t, a, "s", 0, fmt.Sprint(i))
		woken(t, chS, "after a loss")
	}
	require.Equal(t, []string{"1 after", "2 0", "3 1", "4 2"}, streamLines(t, b, "s", 0))
}
