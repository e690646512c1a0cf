package hostio

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A tool call names its principal, one percent-encoded header per present field, and a typed
// failure in the answer reaches the loop with its whole cause chain.
func TestToolCallPrincipalAndTypedFailure(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"no","failure":{"class":"Error","cause":{"class":"VendorStop","extends":["SafetyViolationError"],"retryable":false}}}`))
	}))
	defer srv.Close()
	tools := &Tools{BaseURL: srv.URL}
	ctx := agent.WithPrincipal(context.Background(), loomtype.Identity{Actor: "zoë 50%", OnBehalfOf: "bob/co"})
	_, err := tools.Call(ctx, "pay", []byte(`{}`), "k1")
	var te *agent.ToolError
	require.True(t, errors.As(err, &te))
	require.Equal(t, "no", te.Message)
	require.NotNil(t, te.Failure)
	stop, ok := te.Failure.Terminal()
	require.True(t, ok)
	require.Equal(t, agent.TerminalStop{Class: "SafetyViolationError", Failure: "VendorStop", Depth: 1}, stop)
	require.Equal(t, "zo%C3%AB%2050%25", got.Get(HeaderActor))
	require.Equal(t, "bob%2Fco", got.Get(HeaderOnBehalfOf))
	require.Empty(t, got.Values(HeaderTenant), "an absent field has no header")
	require.Equal(t, "k1", got.Get("Idempotency-Key"))

	// Without a principal on the context, no principal header is sent.
	_, _ = tools.Call(context.Background(), "pay", []byte(`{}`), "k2")
	require.Empty(t, got.Values(HeaderActor))
}
