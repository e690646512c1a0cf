package steps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The kit's own single-frame keys match the shared test vectors (the reference checks the same
// file with its own code).
func TestFrameKeyVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "single-frame", "keys.json"))
	require.NoError(t, err)
	var v struct {
		Cases []struct {
			Outer, Tool, Arguments, Canonical, Key string
			Turn, Position                         int
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Cases)
	for _, c := range v.Cases {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		canon, err := frameCanonical(args)
		require.NoError(t, err)
		require.Equal(t, c.Canonical, canon, c.Arguments)
		key, err := frameKey(c.Outer, c.Turn, c.Position, c.Tool, c.Arguments)
		require.NoError(t, err)
		require.Equal(t, c.Key, key, c.Arguments)
	}
	for _, bad := range []string{`[1]`, `{} {}`, `"x"`, `{`} {
		_, err := frameKey("run:x", 1, 0, "t", bad)
		require.ErrorIs(t, err, errFrameArgs, bad)
	}
}
