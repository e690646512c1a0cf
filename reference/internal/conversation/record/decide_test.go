package record_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var errBoom = errors.New("the decision could not be made")

// TestDecideReturnsTheDecisionsOwnError: a decision whose function fails hands that very error
// back (errors.Is holds), records nothing, and a later decision under the same id is made anew
// and decoded.
func TestDecideReturnsTheDecisionsOwnError(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		var v int
		first := record.Decide(c, "d", &v, func() (any, error) { return nil, errBoom })
		second := record.Decide(c, "d", &v, func() (any, error) { return 42, nil })
		return json.Marshal(map[string]any{"first": errors.Is(first, errBoom), "second": second == nil, "v": v})
	}
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"f": flow}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	_, err = k.Start(ctx, kernel.StartRequest{ID: "x1", Flow: "f", Principal: loomtype.Identity{Tenant: "acme", Actor: "alice"}})
	require.NoError(t, err)
	in, err := k.Await(ctx, "x1")
	require.NoError(t, err)
	require.JSONEq(t, `{"first":true,"second":true,"v":42}`, string(in.Output))
}
