package reftest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

var alice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

// answered waits until conversation id holds n entries, the last one a complete reply, and
// returns their texts.
func answered(t *testing.T, eng *reftest.Engine, id string, n int) []string {
	t.Helper()
	var texts []string
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(context.Background(), alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		texts = nil
		for _, e := range p.Entries {
			texts = append(texts, *e.Text)
		}
		return len(p.Entries) == n && p.Entries[n-1].Status == loomtype.StatusComplete
	}, 10*time.Second, 5*time.Millisecond, "%d entries, the last one answered", n)
	return texts
}

// do makes a request of path at the engine's URL, with the bearer token (none for "").
func do(t *testing.T, eng *reftest.Engine, method, path, token string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	req, err := http.NewRequest(method, eng.URL+path, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestRestartAndKillKeepTheDataAndTheOptions(t *testing.T) {
	ctx := context.Background()
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	dir := eng.Dir
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	_, err = eng.Conversations().SendTurn(ctx, alice, st.ID, "one", conversation.SendOptions{MessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, []string{"one", "You asked: one"}, answered(t, eng, st.ID, 2))

	eng.Restart() // closed, then opened again
	require.Equal(t, dir, eng.Dir)
	_, err = eng.Conversations().SendTurn(ctx, alice, st.ID, "two", conversation.SendOptions{MessageID: "m2"})
	require.NoError(t, err)
	require.Equal(t, []string{"one", "You asked: one", "two", "You asked: two"}, answered(t, eng, st.ID, 4))

	eng.Kill()
	eng.Restart(reftest.Provider(scriptmodel.Echo("re: "))) // the new model, on the same data
	_, err = eng.Conversations().SendTurn(ctx, alice, st.ID, "three", conversation.SendOptions{MessageID: "m3"})
	require.NoError(t, err)
	require.Equal(t, "re: three", answered(t, eng, st.ID, 6)[5])
}

func TestServedWithTokensAtTheSameAddressAfterARestart(t *testing.T) {
	eng := reftest.Open(t, reftest.Tokens(map[string]loomtype.Identity{"tok-alice": alice}), reftest.Served())
	require.True(t, strings.HasPrefix(eng.URL, "http://127.0.0.1:"), eng.URL)
	code, body := do(t, eng, http.MethodPost, "/conversations", "tok-alice")
	require.Equal(t, http.StatusCreated, code, body)
	code, _ = do(t, eng, http.MethodPost, "/conversations", "tok-bob")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = do(t, eng, http.MethodPost, "/conversations", "")
	require.Equal(t, http.StatusUnauthorized, code)

	url := eng.URL
	eng.Kill()
	_, err := http.Get(url + "/.well-known/loom")
	require.Error(t, err, "a killed engine is not served")
	eng.Restart()
	require.Equal(t, url, eng.URL)
	code, body = do(t, eng, http.MethodPost, "/conversations", "tok-alice")
	require.Equal(t, http.StatusCreated, code, body)
}

func TestConfigOpensFromTheConfigurationDocument(t *testing.T) {
	svc := sutconfig.Principal{Tenant: "acme", Actor: "loom-service"}
	eng := reftest.Open(t, reftest.Config(sutconfig.SUTConfig{Identity: sutconfig.IdentityConfig{Insecure: true},
		Shared: sutconfig.SharedConfig{ServicePrincipal: &svc}}), reftest.Served())
	opt := eng.Options()
	require.Equal(t, eng.Dir, opt.DataDir)
	require.Equal(t, [][]byte{eng.Key}, opt.Conversation.Keys, "the rig's key, since the document names none")
	require.Equal(t, &loomtype.Identity{Tenant: "acme", Actor: "loom-service"}, opt.Conversation.Shared.Service)
	code, body := do(t, eng, http.MethodGet, "/.well-known/loom", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "loom-reference")
}

func TestPostgresKeepsTheStateInADatabase(t *testing.T) {
	eng := reftest.Open(t, reftest.Postgres(), reftest.As(alice))
	require.True(t, strings.HasPrefix(eng.StoreURL, "postgres"), eng.StoreURL)
	st, _, err := eng.Conversations().Start(context.Background(), alice, conversation.StartOptions{ID: "kept"})
	require.NoError(t, err)
	eng.Kill()
	eng.Restart()
	got, err := eng.Conversations().Status(context.Background(), alice, st.ID)
	require.NoError(t, err)
	require.Equal(t, st.ID, got.ID)
}
