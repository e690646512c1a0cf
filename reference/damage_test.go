package reference_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

var damageAlice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

type hookCalls struct {
	mu  sync.Mutex
	ids map[string]error
}

func (h *hookCalls) add(id string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[id] = err
}

func (h *hookCalls) get(id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// openDamageEngine opens a served engine whose gateway takes every request as damageAlice and
// reports its internal errors to hook.
func openDamageEngine(t *testing.T, hook *hookCalls) *reftest.Engine {
	t.Helper()
	return reftest.Open(t, reftest.As(damageAlice), reftest.Provider(scriptmodel.Echo("You asked: ")), reftest.Served(),
		reftest.With(func(o *reference.Options) { o.Gateway.OnError = hook.add }))
}

func answered(t *testing.T, cv *conversation.Conversations, id string, turns int) {
	t.Helper()
	require.Eventually(t, func() bool {
		p, err := cv.History(context.Background(), damageAlice, id, conversation.HistoryOptions{Limit: 500})
		require.NoError(t, err)
		n := len(p.Entries)
		return n == 2*turns && p.Entries[n-1].Status == "complete"
	}, 20*time.Second, 5*time.Millisecond)
}

// TestADamagedConversationIsRefusedAndReported changes one word of a conversation's log behind
// the running engine's back: every read of it answers 500 "storage damaged", each reported to the
// error hook under the errorId the caller saw, never a shorter or other past; its acknowledged
// message id is still a repeat; the other conversation is served. The next Open refuses the store.
func TestADamagedConversationIsRefusedAndReported(t *testing.T) {
	ctx := context.Background()
	hook := &hookCalls{ids: map[string]error{}}
	eng := openDamageEngine(t, hook)
	dir := eng.Dir
	cv := eng.Conversations()
	var ids []string
	for range 2 {
		st, _, err := cv.Start(ctx, damageAlice, conversation.StartOptions{})
		require.NoError(t, err)
		_, err = cv.SendTurn(ctx, damageAlice, st.ID, "is pump 7 running?", conversation.SendOptions{MessageID: "m1"})
		require.NoError(t, err)
		answered(t, cv, st.ID, 1)
		ids = append(ids, st.ID)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "loom.db"))
	require.NoError(t, err)
	_, err = db.Exec(`DROP TRIGGER events_append_only_u`)
	require.NoError(t, err)
	res, err := db.Exec(`UPDATE events SET data = CAST(replace(CAST(data AS TEXT), 'pump 7', 'pump 8') AS BLOB) WHERE stream = ? AND instr(CAST(data AS TEXT), 'pump 7') > 0`, logStreamOf(ids[0]))
	require.NoError(t, err)
	n, _ := res.RowsAffected()
	require.Positive(t, n, "the conversation's log holds the text")
	require.NoError(t, db.Close())

	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, eng.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	for _, path := range []string{
		"/conversations/" + ids[0] + "/history",
		"/conversations/" + ids[0] + "/history?direction=backward",
		"/conversations/" + ids[0] + "/history?limit=1",
	} {
		status, body := do(http.MethodGet, path, "")
		require.Equal(t, http.StatusInternalServerError, status, path)
		require.Equal(t, "storage damaged", body["error"], path)
		eid, _ := body["errorId"].(string)
		require.NotEmpty(t, eid)
		require.ErrorIs(t, hook.get(eid), reference.ErrCorrupt, "the error hook has the damage under the errorId the caller saw")
	}
	status, body := do(http.MethodPost, "/conversations/"+ids[0]+"/turns", `{"text":"is pump 7 running?","messageId":"m1"}`)
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, false, body["delivered"], "an acknowledged message id is still a repeat")
	status, _ = do(http.MethodGet, "/conversations/"+ids[1]+"/history", "")
	require.Equal(t, http.StatusOK, status, "the undamaged conversation is served")
	require.NoError(t, eng.Close())

	_, err = reference.Open(ctx, eng.Options())
	require.ErrorIs(t, err, reference.ErrCorrupt)
	var ce *store.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, logStreamOf(ids[0]), ce.Stream)
}

// TestAWriteAheadLogCutShortIsRefusedWhateverSideFileIsLost: a crashed engine's newest commits
// are in the store's write-ahead log. Cut short, with the files beside the database lost or not,
// the log would read as a shorter past (fewer entries, an acknowledged message id taken for a new
// one, a finished run unknown): the engine refuses to open as damaged instead.
func TestAWriteAheadLogCutShortIsRefusedWhateverSideFileIsLost(t *testing.T) {
	ctx := context.Background()
	hook := &hookCalls{ids: map[string]error{}}
	eng := openDamageEngine(t, hook)
	cv := eng.Conversations()
	st, _, err := cv.Start(ctx, damageAlice, conversation.StartOptions{})
	require.NoError(t, err)
	for i := range 30 {
		_, err = cv.SendTurn(ctx, damageAlice, st.ID, fmt.Sprintf("question %d", i+1), conversation.SendOptions{MessageID: fmt.Sprintf("m%d", i+1)})
		require.NoError(t, err)
		answered(t, cv, st.ID, i+1)
	}
	// A second connection holds the database while the engine dies, so that its own closing
	// cannot fold the log into the database: the files stay as a killed process leaves them.
	hold, err := sql.Open("sqlite", "file:"+filepath.Join(eng.Dir, "loom.db"))
	require.NoError(t, err)
	defer hold.Close()
	require.NoError(t, hold.Ping())
	eng.Kill()
	image := map[string][]byte{}
	ents, err := os.ReadDir(eng.Dir)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(eng.Dir, e.Name()))
		require.NoError(t, err)
		image[e.Name()] = b
	}
	require.Greater(t, len(image["loom.db-wal"]), 32+4*4120, "the newest commits are in the log")

	for _, cut := range []int{25, 50, 90} {
		for _, lost := range [][]string{nil, {".head"}, {".identity"}, {".head", ".identity"}} {
			t.Run(fmt.Sprintf("%d%%/lost%v", cut, lost), func(t *testing.T) {
				opt := eng.Options()
				opt.DataDir = t.TempDir()
				for name, b := range image {
					if name == "loom.db-wal" {
						b = b[:len(b)*cut/100]
					}
					if slices.ContainsFunc(lost, func(suffix string) bool { return name == "loom.db"+suffix }) {
						continue
					}
					require.NoError(t, os.WriteFile(filepath.Join(opt.DataDir, name), b, 0o600))
				}
				e, err := reference.Open(ctx, opt)
				if err == nil {
					p, _ := e.Conversations().History(ctx, damageAlice, st.ID, conversation.HistoryOptions{Limit: 500})
					e.Close()
					t.Fatalf("the engine opened, serving %d of the 60 entries", len(p.Entries))
				}
				require.ErrorIs(t, err, reference.ErrCorrupt, "%v", err)
			})
		}
	}
}

// TestAnEmptiedDataDirectoryIsRefused: an engine that held conversations does not come up
// serving none, whether the whole directory was emptied or only the database is gone; allowing
// an empty store is a decision of its own.
func TestAnEmptiedDataDirectoryIsRefused(t *testing.T) {
	for _, what := range []string{"everything", "the database"} {
		t.Run(what, func(t *testing.T) {
			ctx := context.Background()
			hook := &hookCalls{ids: map[string]error{}}
			eng := openDamageEngine(t, hook)
			dir := eng.Dir
			st, _, err := eng.Conversations().Start(ctx, damageAlice, conversation.StartOptions{})
			require.NoError(t, err)
			eng.Kill()
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range ents {
				if what == "everything" || strings.HasPrefix(e.Name(), "loom.db") && !strings.HasSuffix(e.Name(), ".identity") {
					require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
				}
			}
			_, err = reference.Open(ctx, eng.Options())
			require.ErrorIs(t, err, reference.ErrDataGone)
			require.ErrorIs(t, err, store.ErrMissing)
			eng.Restart(reftest.With(func(o *reference.Options) { o.AllowEmpty = true }))
			_, err = eng.Conversations().Status(ctx, damageAlice, st.ID)
			require.ErrorIs(t, err, loomtype.ErrNotFound, "allowed, the store starts empty")
		})
	}
}

// A data directory that does not exist is a first start; one that exists and is empty is not.
func TestAFirstStartNeedsNoPermission(t *testing.T) {
	ctx := context.Background()
	opt := reference.Options{Conversation: conversation.Config{Keys: [][]byte{signingKey()}}, Gateway: gateway.Config{Insecure: true}}
	opt.DataDir = filepath.Join(t.TempDir(), "new")
	eng, err := reference.Open(ctx, opt)
	require.NoError(t, err)
	require.NoError(t, eng.Close())
	opt.DataDir = t.TempDir()
	_, err = reference.Open(ctx, opt)
	require.ErrorIs(t, err, reference.ErrDataGone, fmt.Sprint(err))
}

// logStreamOf names an execution's log in the store: the kernel's journal layout, which the golden
// journals pin.
func logStreamOf(id string) string { return "x/" + id }
