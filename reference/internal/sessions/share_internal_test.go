package sessions

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var sBob = loomtype.Identity{Tenant: "acme", Actor: "bob"}

// shareLog is the most one frame log of these tests holds; a share of n logs is n times it.
const shareLog = 4096

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// shareService opens a session service on a store of its own (one engine), counting its callers'
// shares of logs each shareLog bytes in q, on clock now, its pumps reading the log every
// millisecond and idle after a minute unused; share is how many logs one caller may hold.
func shareService(t *testing.T, q quota.Counter, now *clock, share int) (*Service, *conversation.Conversations) {
	t.Helper()
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, conversation.Deps{}, live.NewHub(0))
	require.NoError(t, err)
	k, err := kernel.Open(ctx, raw, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	cv := dl.Client(k)
	svc := New(k, cv, Config{Limits: stream.Limits{MaxBytes: shareLog}, PrincipalResidentBytes: int64(share) * shareLog,
		Quotas: q, Now: now.Now, Poll: time.Millisecond, Idle: time.Minute})
	t.Cleanup(func() {
		svc.Close()
		k.Close()
		raw.Close()
	})
	return svc, cv
}

// started starts a conversation of who on cv and returns its id.
func started(t *testing.T, cv *conversation.Conversations, who loomtype.Identity) string {
	t.Helper()
	st, _, err := cv.Start(context.Background(), who, conversation.StartOptions{})
	require.NoError(t, err)
	return st.ID
}

// residentRefused checks err is the resident share's refusal at share logs.
func residentRefused(t *testing.T, err error, share int) {
	t.Helper()
	var qe *QuotaError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, QuotaResident, qe.Reason)
	require.EqualValues(t, share*shareLog, qe.Max)
	require.ErrorIs(t, err, loomtype.ErrLimit)
}

// heldResident is how many resident sessions q counts against who.
func heldResident(t *testing.T, q quota.Counter, who loomtype.Identity) int {
	t.Helper()
	n, err := q.Held(context.Background(), quota.Resident, who, 0)
	require.NoError(t, err)
	return n
}

// Two services (two engines) counting in one counter hold one share of a caller between them: two
// sessions opened, one on each (a ticket waits for each, so neither is let go), and a third is
// refused on either; a session held already is opened again; another caller is not affected; once
// one service is closed, its session no longer counts.
func TestAShareIsOneAcrossServices(t *testing.T) {
	ctx := context.Background()
	q, now := &quota.Memory{}, &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, cva := shareService(t, q, now, 2)
	b, cvb := shareService(t, q, now, 2)
	c1, c2, c3, d := started(t, cva, qAlice), started(t, cvb, qAlice), started(t, cva, qAlice), started(t, cvb, sBob)
	_, err := a.Open(ctx, qAlice, c1, 0, "")
	require.NoError(t, err)
	_, err = b.Open(ctx, qAlice, c2, 0, "")
	require.NoError(t, err)
	_, err = a.Open(ctx, qAlice, c3, 0, "")
	residentRefused(t, err, 2)
	residentRefused(t, b.Hold(ctx, qAlice, started(t, cvb, qAlice)), 2)
	_, err = a.Open(ctx, qAlice, c1, 0, "")
	require.NoError(t, err, "a session the caller holds already")
	require.NoError(t, b.Hold(ctx, sBob, d), "another caller")
	require.Equal(t, 2, heldResident(t, q, qAlice))

	b.Close()
	require.Equal(t, 1, heldResident(t, q, qAlice), "the closed service's session no longer counts")
	_, err = a.Open(ctx, qAlice, c3, 0, "")
	require.NoError(t, err)
	require.Equal(t, 2, heldResident(t, q, qAlice))
}

// Past its share, a caller's own sessions in this service that nobody reads and no ticket waits
// for are let go, and their slots given back, before the new one is refused; one in another
// service is not this one's to let go.
func TestPastTheShareTheCallersUnusedSessionsAreLetGo(t *testing.T) {
	ctx := context.Background()
	q, now := &quota.Memory{}, &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, cva := shareService(t, q, now, 1)
	b, cvb := shareService(t, q, now, 1)
	c1, c2, c3 := started(t, cva, qAlice), started(t, cva, qAlice), started(t, cvb, qAlice)
	require.NoError(t, a.Hold(ctx, qAlice, c1))
	require.NoError(t, a.Hold(ctx, qAlice, c2), "c1 is let go")
	require.Equal(t, 1, a.Memory().Sessions)
	require.Equal(t, 1, heldResident(t, q, qAlice))
	_, err := a.Open(ctx, qAlice, c2, 0, "") // a ticket waits for c2 now
	require.NoError(t, err)
	residentRefused(t, a.Hold(ctx, qAlice, c1), 1)
	require.NoError(t, a.Hold(ctx, sBob, started(t, cva, sBob)), "another caller")

	_, err = a.Redeem(mustTicket(t, a), qAlice, "")
	require.NoError(t, err)
	require.NoError(t, a.Hold(ctx, qAlice, c1), "c2 is let go once its ticket is presented")
	residentRefused(t, b.Hold(ctx, qAlice, c3), 1)
	require.Equal(t, 1, heldResident(t, q, qAlice))
}

// mustTicket is the one ticket of qAlice's waiting in svc.
func mustTicket(t *testing.T, svc *Service) string {
	t.Helper()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	var found []string
	for tk, tt := range svc.tickets {
		if tt.Who == qAlice && !tt.used {
			found = append(found, tk)
		}
	}
	require.Len(t, found, 1)
	return found[0]
}

// A session whose pump stops for being idle gives its slot back: the caller's share has room
// again without any open of the caller's.
func TestAnIdleSessionGivesItsSlotBack(t *testing.T) {
	ctx := context.Background()
	q, now := &quota.Memory{}, &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, cva := shareService(t, q, now, 1)
	require.NoError(t, a.Hold(ctx, qAlice, started(t, cva, qAlice)))
	require.Equal(t, 1, heldResident(t, q, qAlice))
	now.add(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for heldResident(t, q, qAlice) != 0 {
		require.True(t, time.Now().Before(deadline), "the idle session's slot was never given back")
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, 0, a.Memory().Sessions)
}

// A reader that stops gives its caller's share room at once, in another service too: the session
// it read, with no ticket waiting, counts against nobody any more; a reader that comes back
// charges it again.
func TestAReaderThatStopsGivesTheShareRoomInEveryService(t *testing.T) {
	ctx := context.Background()
	q, now := &quota.Memory{}, &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, cva := shareService(t, q, now, 1)
	b, cvb := shareService(t, q, now, 1)
	c1, c2 := started(t, cva, qAlice), started(t, cvb, qAlice)
	require.NoError(t, a.Hold(ctx, qAlice, c1))
	sub, _, _, _, _, err := a.Subscribe(ctx, c1, 0)
	require.NoError(t, err)
	residentRefused(t, b.Hold(ctx, qAlice, c2), 1)

	sub.Close()
	require.Equal(t, 0, heldResident(t, q, qAlice), "a session nobody reads still counts")
	require.NoError(t, b.Hold(ctx, qAlice, c2), "the share had no room after the reader stopped")
	residentRefused(t, a.Hold(ctx, qAlice, c1), 1)
}
