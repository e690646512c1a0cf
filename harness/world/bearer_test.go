package world_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
)

// TestModelReadsTheBearerSchemeInAnyCase: the API key a system sends is recorded whatever the
// case of its scheme (RFC 9110 §11.1); another scheme carries no key.
func TestModelReadsTheBearerSchemeInAnyCase(t *testing.T) {
	w := start(t, world.Options{})
	for i, c := range []struct{ header, key string }{
		{"Bearer k1", "k1"}, {"bearer k2", "k2"}, {"BEARER  k3", "k3"}, {"Basic k4", ""},
	} {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		req, err := http.NewRequest(http.MethodPost, w.URL()+"/v1/chat/completions", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", c.header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		r, err := w.Model().WaitDone(bounded(t), i)
		require.NoError(t, err)
		require.Equal(t, c.key, r.APIKey, c.header)
	}
}
