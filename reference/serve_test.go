package reference_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestServeAppliesTheConfiguredEdge: Serve takes its limits from the configuration document,
// Close ends it with ErrEngineClosed, and a Serve after Close returns at once.
func TestServeAppliesTheConfiguredEdge(t *testing.T) {
	eng := reftest.Open(t, reftest.Config(sutconfig.SUTConfig{Identity: sutconfig.IdentityConfig{Insecure: true},
		Gateway: sutconfig.GatewayConfig{MaxConnections: 1, RequestTimeoutMs: 200, HeadersTimeoutMs: 100}}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()

	tr := &http.Transport{}
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + ln.Addr().String() + "/.well-known/loom")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is kept alive
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The kept-alive connection holds the one slot: a second client is closed unanswered.
	_, err = (&http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}).Get("http://" + ln.Addr().String() + "/.well-known/loom")
	require.Error(t, err)
	tr.CloseIdleConnections()

	require.NoError(t, eng.Close())
	select {
	case err := <-served:
		require.True(t, errors.Is(err, reference.ErrEngineClosed), "Serve returned %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorIs(t, eng.Serve(ln2), reference.ErrEngineClosed)
}
