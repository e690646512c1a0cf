package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
)

// frameKeyCases are the test vectors of fixtures/single-frame/keys.json.
type frameKeyCases struct {
	Cases []struct {
		Outer     string `json:"outer"`
		Turn      int    `json:"turn"`
		Position  int    `json:"position"`
		Tool      string `json:"tool"`
		Arguments string `json:"arguments"`
		Canonical string `json:"canonical"`
		Key       string `json:"key"`
	} `json:"cases"`
}

// The single-frame runner's nested keys and canonical JSON match the shared test vectors.
func TestFrameKeyVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "single-frame", "keys.json"))
	require.NoError(t, err)
	var v frameKeyCases
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Cases)
	for _, c := range v.Cases {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		canon, err := agent.CanonicalJSON([]byte(args))
		require.NoError(t, err, c.Arguments)
		require.Equal(t, c.Canonical, string(canon), c.Arguments)
		key, err := agent.FrameKey(c.Outer, c.Turn, c.Position, c.Tool, c.Arguments)
		require.NoError(t, err)
		require.Equal(t, c.Key, key, c.Arguments)
	}
	_, err = agent.FrameKey("run:x", 1, 0, "t", `[1]`)
	require.ErrorIs(t, err, agent.ErrNotJSONObject)
	_, err = agent.FrameKey("run:x", 1, 0, "t", `{} {}`)
	require.ErrorIs(t, err, agent.ErrNotJSONObject)
}
