package reference_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func TestSmoke(t *testing.T) {
	w := world.New(world.Options{})
	_, err := w.Start("")
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Identity().Add("tok-alice", sutconfig.Principal{Tenant: "acme", Actor: "alice"}))
	eng := reftest.Open(t, reftest.Config(w.Config(sutconfig.SUTConfig{})), reftest.Served())
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, eng.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-alice")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do("POST", "/conversations", `{"id":"c1"}`)
	require.Equal(t, 201, code, body)
	var started struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &started))
	require.Equal(t, conversation.ChosenID(loomtype.Identity{Tenant: "acme", Actor: "alice"}, "c1"), started.ID, "a chosen id is the owner's own")
	code, body = do("POST", "/conversations/"+started.ID+"/turns", `{"text":"hello","messageId":"m1"}`)
	require.Equal(t, 202, code, body)
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_, body = do("GET", "/conversations/"+started.ID+"/history", "")
		var page struct{ Entries []map[string]any }
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		if len(page.Entries) == 2 {
			require.Equal(t, "re: hello", page.Entries[1]["text"], body)
			break
		}
		require.True(t, time.Now().Before(deadline), body)
		<-tick.C
	}
	t.Log(body)
}
