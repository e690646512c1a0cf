package sessions_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// copyDir copies the regular files of dir src into dir dst (made anew).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(dst))
	require.NoError(t, os.MkdirAll(dst, 0o700))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
}

// command logs one term-command frame in session id and returns its cursor.
func command(t *testing.T, ss *sessions.Service, id string, i int) int64 {
	t.Helper()
	f, ok, err := ss.Command(context.Background(), gAlice, id, fmt.Sprintf("echo %d", i), false)
	require.NoError(t, err)
	require.True(t, ok)
	return f.Cur
}

// replayFrom subscribes to session id from cursor from and returns what it is served.
func replayFrom(t *testing.T, ss *sessions.Service, id string, from int64) (replay []stream.Frame, reset bool, head, floor int64) {
	t.Helper()
	sub, replay, reset, head, floor, err := ss.Subscribe(context.Background(), id, from)
	require.NoError(t, err)
	sub.Close()
	return replay, reset, head, floor
}

// Frames are committed without waiting for the disk, with cursors reserved ahead by a synced
// commit. A crash of the process keeps them. A crash of the machine that takes the relaxed frames
// is played by putting the data directory back as it was after the last synced commit (a real
// prefix of the commits: what the disk held) and opening the store once on another boot, which
// raises its loss epoch. Then every reader holding a cursor up to the reservation is reset, none
// finds another frame at a cursor it holds, and the log goes on above the reservation, across
// later restarts too.
func TestAMachineCrashNeverTakesBackACursor(t *testing.T) {
	ctx := context.Background()
	eng := reftest.Open(t, reftest.As(gAlice), reftest.Provider(scriptmodel.Gated()))
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{ID: "lost-frames"})
	require.NoError(t, err)
	id := st.ID

	// The first frame raises the reservation, synced: the disk holds it and cursors up to 1+256.
	require.EqualValues(t, 1, command(t, eng.Sessions(), id, 1))
	eng.Kill()
	disk := filepath.Join(t.TempDir(), "disk")
	copyDir(t, eng.Dir, disk)

	// Relaxed frames, read by a reader who now holds cursor 4.
	eng.Restart()
	for i := 2; i <= 4; i++ {
		require.EqualValues(t, i, command(t, eng.Sessions(), id, i))
	}
	replay, reset, head, _ := replayFrom(t, eng.Sessions(), id, 0)
	require.False(t, reset)
	require.EqualValues(t, 4, head)
	require.Len(t, replay, 4)
	held := replay[3]

	// A crash of the process keeps them: the reader goes on from 4, and 4 is the same frame.
	eng.Kill()
	eng.Restart()
	replay, reset, head, _ = replayFrom(t, eng.Sessions(), id, 3)
	require.False(t, reset, "a crash of the process takes no frame")
	require.EqualValues(t, 4, head)
	require.Equal(t, []stream.Frame{held}, replay)

	// The machine crashes: the disk holds what the synced commit left, and the store learns at its
	// next open that the machine started again after an unclean stop.
	eng.Kill()
	copyDir(t, disk, eng.Dir)
	s, err := sqlite.Open(ctx, filepath.Join(eng.Dir, "loom.db"), sqlite.Options{BootID: "the-next-boot"})
	require.NoError(t, err)
	require.EqualValues(t, 1, s.LossEpoch())
	require.NoError(t, s.Close())
	eng.Restart()

	// Cursors 2..4 were lost, and up to 257 may have been handed out: 2..258 are placeholders
	// below the floor, and every reader holding one of them, or 1, is reset.
	const floor = 1 + 256 + 2
	for _, from := range []int64{0, 1, 4, 257} {
		replay, reset, head, fl := replayFrom(t, eng.Sessions(), id, from)
		require.True(t, reset, "a reader holding cursor %d is reset", from)
		require.Empty(t, replay, "from %d", from)
		require.EqualValues(t, floor-1, head)
		require.EqualValues(t, floor, fl)
	}
	require.EqualValues(t, floor, command(t, eng.Sessions(), id, 5), "the log goes on above the reservation")
	replay, reset, _, _ = replayFrom(t, eng.Sessions(), id, floor-1)
	require.False(t, reset)
	require.Len(t, replay, 1)
	require.EqualValues(t, floor, replay[0].Cur)
	require.JSONEq(t, `{"command":"echo 5","via":"terminal"}`, string(replay[0].Data))

	// The floor is kept: a later restart on the same boot resets the same readers, and serves the
	// same frame above it.
	eng.Kill()
	eng.Restart()
	_, reset, _, fl := replayFrom(t, eng.Sessions(), id, 4)
	require.True(t, reset)
	require.EqualValues(t, floor, fl)
	again, reset, _, _ := replayFrom(t, eng.Sessions(), id, floor-1)
	require.False(t, reset)
	require.Equal(t, replay, again)
}
