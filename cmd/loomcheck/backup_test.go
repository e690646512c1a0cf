package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

var backupAlice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

func openBackupEngine(t *testing.T, dir string, key []byte) *reference.Engine {
	t.Helper()
	eng, err := reference.Open(context.Background(), reference.Options{
		DataDir:      dir,
		Conversation: reference.ConversationConfig{Keys: [][]byte{key}},
		Gateway:      reference.GatewayConfig{Insecure: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

// wholeHistory is every entry of a conversation, as JSON, once its newest turn has its reply.
func wholeHistory(t *testing.T, cv *reference.Conversations, id string, turns int) string {
	t.Helper()
	ctx := context.Background()
	var out []loomtype.Entry
	require.Eventually(t, func() bool {
		out = nil
		cursor := ""
		for {
			p, err := cv.History(ctx, backupAlice, id, reference.HistoryOptions{Cursor: cursor, Limit: 500})
			require.NoError(t, err)
			out = append(out, p.Entries...)
			if p.Done {
				break
			}
			cursor = p.NextCursor
		}
		return len(out) == 2*turns && out[len(out)-1].Role == loomtype.RoleAssistant && out[len(out)-1].Status == "complete"
	}, 20*time.Second, 5*time.Millisecond)
	b, err := json.Marshal(out)
	require.NoError(t, err)
	return string(b)
}

func TestBackupWhileServingAndRestore(t *testing.T) {
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	root := t.TempDir()
	live := filepath.Join(root, "live")
	eng := openBackupEngine(t, live, key)
	cv := eng.Conversations()
	st, _, err := cv.Start(ctx, backupAlice, reference.StartOptions{})
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		r, err := cv.SendTurn(ctx, backupAlice, st.ID, fmt.Sprintf("question %d", i), reference.SendOptions{MessageID: fmt.Sprintf("m%d", i)})
		require.NoError(t, err)
		require.True(t, r.Delivered)
		wholeHistory(t, cv, st.ID, i)
	}
	want := wholeHistory(t, cv, st.ID, 3)

	// Another conversation is written to all along the backup.
	other, _, err := cv.Start(ctx, backupAlice, reference.StartOptions{})
	require.NoError(t, err)
	stop, writing := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sent := 0
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent++
			_, _ = cv.SendTurn(ctx, backupAlice, other.ID, fmt.Sprintf("more %d", sent), reference.SendOptions{MessageID: fmt.Sprintf("o%d", sent)})
			if sent == 1 {
				close(writing)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	<-writing // the backup starts once a write to the other conversation is done
	file := filepath.Join(root, "loom-backup.db")
	code, out, errOut := run(t, "backup", "--data", live, "--to", file)
	close(stop)
	wg.Wait()
	require.Equal(t, 0, code, out+errOut)
	code, _, _ = run(t, "backup", "--data", live, "--to", file)
	require.Equal(t, exitNonConformant, code, "a backup never overwrites a file")

	restored := filepath.Join(root, "restored")
	code, out, errOut = run(t, "restore", "--from", file, "--data", restored)
	require.Equal(t, 0, code, out+errOut)
	code, _, _ = run(t, "restore", "--from", file, "--data", restored)
	require.Equal(t, exitNonConformant, code, "a restore never replaces a store")

	eng2 := openBackupEngine(t, restored, key)
	cv2 := eng2.Conversations()
	require.Equal(t, want, wholeHistory(t, cv2, st.ID, 3), "the restored engine serves exactly the history backed up")
	for i := 1; i <= 3; i++ {
		r, err := cv2.SendTurn(ctx, backupAlice, st.ID, fmt.Sprintf("question %d", i), reference.SendOptions{MessageID: fmt.Sprintf("m%d", i)})
		require.NoError(t, err)
		require.False(t, r.Delivered, "m%d was acknowledged before the backup: a repeat", i)
	}
	// A new turn fences what a repeat could have run again: the conversation answers it after.
	r, err := cv2.SendTurn(ctx, backupAlice, st.ID, "question 4", reference.SendOptions{MessageID: "m4"})
	require.NoError(t, err)
	require.True(t, r.Delivered)
	var before, after []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(want), &before))
	require.NoError(t, json.Unmarshal([]byte(wholeHistory(t, cv2, st.ID, 4)), &after))
	require.Equal(t, before, after[:len(before)], "nothing ran again: the history is the backed-up one and the new turn")
	_, err = cv2.Status(ctx, backupAlice, other.ID)
	require.NoError(t, err, "the conversation written during the backup is in it")
}

func TestRestoreUsage(t *testing.T) {
	code, _, _ := run(t, "restore", "--from", "x.db")
	require.Equal(t, exitUsage, code)
	code, _, _ = run(t, "backup")
	require.Equal(t, exitUsage, code)
}
