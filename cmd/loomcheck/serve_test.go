package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a serving command.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is a `loomcheck serve` running in the test.
type served struct {
	base, token    string
	stdout, stderr *lockedBuffer
}

var (
	servingRE = regexp.MustCompile(`serving (http://[0-9.:]+) `)
	tokenRE   = regexp.MustCompile(`Authorization: Bearer (dev-[0-9a-f]+)`)
)

// startServe runs `loomcheck serve args...` on a free port and a fresh data directory until the
// test ends, and returns once it serves.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	done := make(chan int, 1)
	args = append([]string{"--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data")}, args...)
	go func() { done <- serve(ctx, args, s.stdout, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, exitConformant, <-done, s.stderr.String())
	})
	require.Eventually(t, func() bool {
		m := servingRE.FindStringSubmatch(s.stdout.String())
		tk := tokenRE.FindStringSubmatch(s.stdout.String())
		if m == nil || tk == nil || !strings.Contains(s.stdout.String(), "curl -N") {
			return false
		}
		s.base, s.token = m[1], tk[1]
		return true
	}, 10*time.Second, 10*time.Millisecond, "serve did not start: %s %s", s.stdout, s.stderr)
	return s
}

func (s *served) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// failedTurn starts a conversation, sends one turn and returns the failed reply's reason and errorId.
func (s *served) failedTurn(t *testing.T) (reason, errorID string) {
	t.Helper()
	code, body := s.do(t, "POST", "/conversations", "{}")
	require.Equal(t, http.StatusCreated, code, body)
	var conv struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &conv))
	code, body = s.do(t, "POST", "/conversations/"+conv.ID+"/turns", `{"messageId":"m1","text":"hello"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	require.Eventually(t, func() bool {
		_, body := s.do(t, "GET", "/conversations/"+conv.ID+"/history", "")
		var page struct {
			Entries []struct{ Role, Status, Reason, ErrorID string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		for _, e := range page.Entries {
			if e.Role == "assistant" {
				require.Equal(t, "failed", e.Status, body)
				reason, errorID = e.Reason, e.ErrorID
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	return reason, errorID
}

// TestServeLogsTheModelErrorWithItsErrorID: a model that answers every request with an error (an
// unknown model name, a model without tools, a wrong URL path) fails the turn with model-error,
// and the server's log holds the real error under the errorId the history shows.
func TestServeLogsTheModelErrorWithItsErrorID(t *testing.T) {
	for _, c := range []struct {
		name, says string
		status     int
	}{
		{"unknown model", `model "nosuch" not found`, http.StatusNotFound},
		{"no tool support", "nosuch does not support tools", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": c.says, "type": "invalid_request_error"}})
			}))
			defer provider.Close()
			s := startServe(t, "--model-url", provider.URL+"/v1", "--model", "nosuch")
			reason, id := s.failedTurn(t)
			require.Equal(t, "model-error", reason)
			require.NotEmpty(t, id)
			require.Eventually(t, func() bool {
				for _, line := range strings.Split(s.stderr.String(), "\n") {
					if strings.Contains(line, "level=ERROR") && strings.Contains(line, "errorId="+id) && strings.Contains(line, "not") {
						return true
					}
				}
				return false
			}, 5*time.Second, 10*time.Millisecond, "the log holds no error with errorId %s:\n%s", id, s.stderr)
		})
	}
}

// TestServePrintsTheNextSteps: after the first curl line come a turn, the history and the stream,
// each with the server's real address and token.
func TestServePrintsTheNextSteps(t *testing.T) {
	s := startServe(t)
	out := s.stdout.String()
	for _, want := range []string{
		"curl -s -X POST -H 'Authorization: Bearer " + s.token + "' -H 'Content-Type: application/json' -d '{}' " + s.base + "/conversations\n",
		s.base + "/conversations/ID/turns\n",
		"curl -s -H 'Authorization: Bearer " + s.token + "' " + s.base + "/conversations/ID/history\n",
		"curl -N -H 'Authorization: Bearer " + s.token + "' " + s.base + "/conversations/ID/events\n",
	} {
		require.Contains(t, out, want)
	}
	require.Less(t, strings.Index(out, "/conversations\n"), strings.Index(out, "/turns\n"), "the start comes first")
}

// TestServeRefusesABadModelURL: a --model-url that is not an http or https URL with a host is a
// usage error at start that names the flag.
func TestServeRefusesABadModelURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:11434/v1", "ftp://127.0.0.1/v1", "http://", "http://[::1", "localhost"} {
		code, _, errOut := run(t, "serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "d"), "--model-url", u)
		require.Equal(t, exitUsage, code, u)
		require.Contains(t, errOut, "--model-url", u)
	}
}

// TestServeBuiltinDelay: with --builtin-delay the built-in model's answer takes at least one delay
// per streamed piece (`You said: "hello"` is three pieces).
func TestServeBuiltinDelay(t *testing.T) {
	s := startServe(t, "--builtin-delay", "150ms")
	code, body := s.do(t, "POST", "/conversations", "{}")
	require.Equal(t, http.StatusCreated, code, body)
	var conv struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &conv))
	began := time.Now()
	code, body = s.do(t, "POST", "/conversations/"+conv.ID+"/turns", `{"messageId":"m1","text":"hello"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	require.Eventually(t, func() bool {
		_, body := s.do(t, "GET", "/conversations/"+conv.ID+"/history", "")
		return strings.Contains(body, `"status":"complete"`)
	}, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(began), 450*time.Millisecond)
	code, _, errOut := run(t, "serve", "--builtin-delay", "-1s")
	require.Equal(t, exitUsage, code, errOut)
}

// TestServeConfigWithoutIdentityNamesTheField: a configuration with no identity is refused with
// the document's own field names.
func TestServeConfigWithoutIdentityNamesTheField(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "c.json")
	require.NoError(t, os.WriteFile(doc, []byte(`{"listen":"127.0.0.1:0","dataDir":"`+filepath.Join(dir, "d")+`","signing":{"key":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}}`), 0o600))
	code, _, errOut := run(t, "serve", "--config", doc)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "identity.insecure")
	require.NotContains(t, errOut, "Insecure")
}

// TestServeAndValidateAgree: on the same documents, serve refuses what validate refuses, and what
// serve starts on validate accepts.
func TestServeAndValidateAgree(t *testing.T) {
	dir := t.TempDir()
	key := `"signing":{"key":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}`
	data := func(n string) string { return `"dataDir":"` + filepath.Join(dir, n) + `"` }
	for i, c := range []struct {
		doc   string
		valid bool
	}{
		{`{"listen":"127.0.0.1:0",` + data("a") + `,` + key + `,"identity":{"insecure":true}}`, true},
		{`{"listen":"127.0.0.1:0",` + data("b") + `,` + key + `,"identity":{"principals":{"t":{"tenant":"x","actor":"y"}}}}`, true},
		{`{"listen":"127.0.0.1:0",` + data("c") + `,` + key + `,"identity":{"insecure":true},"colour":"blue"}`, false},
		{`{"listen":"127.0.0.1:0",` + data("d") + `,"identity":{"insecure":true}}`, false},
		{`{"listen":"nowhere",` + data("e") + `,` + key + `,"identity":{"insecure":true}}`, false},
		{`{"listen":"127.0.0.1:0",` + data("f") + `,` + key + `,"identity":{"insecure":"yes"}}`, false},
		{`{"listen":"127.0.0.1:0",` + data("g") + `,` + key + `,"identity":{"insecure":true},"conversation":{"maxScan":-1}}`, false},
	} {
		doc := filepath.Join(dir, "doc.json")
		require.NoError(t, os.WriteFile(doc, []byte(c.doc), 0o600))
		vcode, vout, _ := run(t, "validate", "--schema", "sut-config", doc)
		if c.valid {
			require.Equal(t, exitConformant, vcode, "%d: %s", i, vout)
			ctx, cancel := context.WithCancel(context.Background())
			out, errOut := &lockedBuffer{}, &lockedBuffer{}
			done := make(chan int, 1)
			go func() { done <- serve(ctx, []string{"--config", doc}, out, errOut) }()
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "serving http://") }, 10*time.Second, 10*time.Millisecond, "%d: %s", i, errOut)
			cancel()
			require.Equal(t, exitConformant, <-done, "%d: %s", i, errOut)
			continue
		}
		require.Equal(t, exitNonConformant, vcode, "%d: %s", i, vout)
		// A serve that took the document would serve until the context ends, then exit 0.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, errOut := &lockedBuffer{}, &lockedBuffer{}
		code := serve(ctx, []string{"--config", doc}, out, errOut)
		cancel()
		require.Equal(t, exitUsage, code, "%d: %s%s", i, out, errOut)
		require.Contains(t, errOut.String(), "not a valid sut-config", i)
	}
}

// TestGitIgnoresTheDataDirectory: serve's default data directory is not committed by accident.
func TestGitIgnoresTheDataDirectory(t *testing.T) {
	b, err := os.ReadFile("../../.gitignore")
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(b), "\n"), "/loom-data/")
}
