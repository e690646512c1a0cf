package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// syncBuffer is a bytes.Buffer safe to write from the command's goroutine while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// worldAnswersRE finds the address in the line the world prints once it listens.
var worldAnswersRE = regexp.MustCompile(`the world answers on (http://[0-9.:]+),`)

func TestWorldServesItsScriptAndControlAPI(t *testing.T) {
	script := filepath.Join(t.TempDir(), "world.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"model": [{"chunks": ["Hel", "lo"], "keepAlive": true, "multiLine": true}]}`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	// The world binds a port of the kernel's choosing and says where it answers.
	go func() { done <- runWorld(ctx, []string{"--addr", "127.0.0.1:0", "--script", script}, &out, &errOut) }()
	defer func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code)
		case <-time.After(10 * time.Second):
			t.Error("world did not stop")
		}
	}()
	var base string
	require.Eventually(t, func() bool {
		m := worldAnswersRE.FindStringSubmatch(errOut.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "the world did not say where it answers: %s", &errOut)
	require.False(t, strings.HasSuffix(base, ":0"), "the world names the port it bound, not %s", base)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/control/rejections")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 10*time.Second, 20*time.Millisecond, errOut.String())

	var cfg sutconfig.SUTConfig
	require.NoError(t, json.Unmarshal([]byte(out.String()), &cfg), out.String())
	assert.Equal(t, base+"/v1", cfg.Model.BaseURL)
	assert.Contains(t, errOut.String(), base+"/control/script")

	chat := func() (string, string) {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.Header.Get("Content-Type"), string(b)
	}
	// The script's reply: keep-alive comments and JSON over several data lines.
	ct, body := chat()
	assert.Equal(t, "text/event-stream", ct)
	assert.Contains(t, body, ": keep-alive\n\n")
	assert.Contains(t, body, "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"},\ndata: \"finish_reason\":null,\n")
	assert.True(t, strings.HasSuffix(body, "data: [DONE]\n\n"), body)

	// A reply added through the control API: a plain answer to the streamed request.
	resp, err := http.Post(base+"/control/script", "application/json", strings.NewReader(`{"model": [{"text": "by hand", "plain": true}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	ct, body = chat()
	assert.Equal(t, "application/json; charset=utf-8", ct)
	var plain struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &plain), body)
	require.Len(t, plain.Choices, 1)
	assert.Equal(t, "by hand", plain.Choices[0].Message.Content)
	assert.Equal(t, 4+1+2, plain.Usage.TotalTokens) // "hi" 1 + 4 per message; "by hand" 2

	resp, err = http.Get(base + "/control/model/requests")
	require.NoError(t, err)
	var reqs []struct{ Index int }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reqs))
	resp.Body.Close()
	assert.Len(t, reqs, 2)
}

func TestWorldRefusesABadScript(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"model": [{"txt": "x"}]}`), 0o600))
	for _, file := range []string{bad, filepath.Join(dir, "missing.json")} {
		var out, errOut bytes.Buffer
		code := runWorld(context.Background(), []string{"--addr", "127.0.0.1:0", "--print", "--script", file}, &out, &errOut)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, errOut.String(), "--script "+file)
		assert.Empty(t, out.String())
	}
}
