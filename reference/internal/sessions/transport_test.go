package sessions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

type wireFrame struct {
	Cur  int64           `json:"cur"`
	Span int             `json:"span"`
	Type string          `json:"type"`
	Turn int64           `json:"turn"`
	Data json.RawMessage `json:"data"`
}

// TestSessionStreamSeedsAndServesBothTransports: a conversation with one answered turn, opened
// for the first time, is seeded from its history; the WebSocket (which outlives the edge's
// request deadline) and SSE serve the same frames, and a ticket works once.
func TestSessionStreamSeedsAndServesBothTransports(t *testing.T) {
	eng := reftest.Open(t, reftest.Served(), reftest.Config(sutconfig.SUTConfig{Identity: sutconfig.IdentityConfig{Insecure: true},
		Gateway: sutconfig.GatewayConfig{RequestTimeoutMs: 300, HeadersTimeoutMs: 200}, Stream: sutconfig.StreamConfig{HeartbeatMs: 100}}))
	base := eng.URL
	addr := strings.TrimPrefix(base, "http://")
	post := func(path, body string) map[string]any {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var v map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		require.Less(t, resp.StatusCode, 300, "%s: %v", path, v)
		return v
	}
	id := post("/conversations", `{}`)["id"].(string)
	post("/conversations/"+id+"/turns", `{"text":"hello there"}`)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/conversations/" + id + "/history")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var p struct {
			Entries []json.RawMessage `json:"entries"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return len(p.Entries) >= 2
	}, 10*time.Second, 20*time.Millisecond)

	op := post("/sessions/"+id+"/stream/open", `{"from":0}`)
	require.EqualValues(t, 1, op["floor"])
	require.EqualValues(t, 3, op["head"]) // user-message, text-delta (the seeded reply's text), text-done
	tk := op["ticket"].(string)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/sessions/"+id+"/stream?ticket="+tk, nil)
	require.NoError(t, err)
	defer c.CloseNow()
	var got []wireFrame
	for len(got) < 3 {
		_, b, err := c.Read(ctx)
		require.NoError(t, err)
		var f wireFrame
		require.NoError(t, json.Unmarshal(b, &f))
		if f.Cur > 0 {
			got = append(got, f)
		}
	}
	require.Equal(t, []string{"session.user-message", "session.text-delta", "session.text-done"},
		[]string{got[0].Type, got[1].Type, got[2].Type})
	// The socket outlives the edge's 300 ms request deadline, with heartbeats: five of them, one
	// every 100 ms, take the server past it whatever the client's pace.
	for beats := 0; beats < 5; beats++ {
		_, b, err := c.Read(ctx)
		require.NoError(t, err, "after %d heartbeats", beats)
		require.Contains(t, string(b), `"session.heartbeat"`)
	}

	// The ticket is spent.
	_, resp, err := websocket.Dial(ctx, "ws://"+addr+"/sessions/"+id+"/stream?ticket="+tk, nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// SSE after cursor 1 serves frames 2 and 3.
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/sessions/"+id+"/stream", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1")
	sresp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer sresp.Body.Close()
	sc := bufio.NewScanner(sresp.Body)
	var ids []string
	for sc.Scan() && len(ids) < 2 {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, v)
		}
	}
	require.Equal(t, []string{"2", "3"}, ids)
}
