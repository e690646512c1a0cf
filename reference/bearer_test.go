package reference_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestBearerSchemeIsCaseInsensitive: the authentication scheme is matched without regard to case
// (RFC 9110 §11.1), with any run of spaces after it; the token itself is exact, and another
// scheme, a missing token or a token in the wrong case is no credential.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	auth := reference.BearerAuth(&hostio.Identity{Static: map[string]sutconfig.Principal{"Tok-A": {Tenant: "acme", Actor: "alice"}}})
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer Tok-A", true},
		{"bearer Tok-A", true},
		{"BEARER Tok-A", true},
		{"bEaReR  Tok-A", true},
		{"Bearer tok-a", false},
		{"Basic Tok-A", false},
		{"BearerTok-A", false},
		{"Bearer ", false},
		{"bearer", false},
		{"Tok-A", false},
	} {
		r := httptest.NewRequest("GET", "/conversations", nil)
		r.Header.Set("Authorization", c.header)
		id, err := auth(r)
		if c.ok {
			require.NoError(t, err, c.header)
			require.Equal(t, alice, id, c.header)
			continue
		}
		require.ErrorIs(t, err, gateway.ErrUnauthenticated, c.header)
	}
}
