package world_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
)

// TestOfficialOpenAIClient drives the world's model with the official `openai` npm client
// (tools/lint/openai-client.mjs). It needs node and `npm ci` in tools/lint; without them it skips,
// except in CI (CI set), where it fails.
func TestOfficialOpenAIClient(t *testing.T) {
	script, err := filepath.Abs("../../tools/lint/openai-client.mjs")
	require.NoError(t, err)
	node, nerr := exec.LookPath("node")
	_, merr := os.Stat("../../tools/lint/node_modules/openai/package.json")
	if nerr != nil || merr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node (%v) and tools/lint/node_modules (%v) are needed in CI: run (cd tools/lint && npm ci)", nerr, merr)
		}
		t.Skip("needs node and (cd tools/lint && npm ci)")
	}
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(
		world.Reply{Text: "Hi there"},
		world.Reply{Chunks: []string{"Hel", "lo"}},
		world.Reply{Chunks: []string{"A", "B"}, KeepAlive: true, MultiLine: true},
		world.Reply{Text: "big:", Fill: 262145, ToolCalls: []world.ToolCall{{Name: "store", Arguments: `{"k":1}`, Fill: 262145}}},
	))
	// A backstop, not a timing: node starts the client and its module cold, which on a loaded
	// machine takes longer than the world's waits.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, w.URL()+"/v1")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, string(stderr))
	// "hello" 2 + 4 per message; "Hi there" 2, "Hello" 2, "AB" 1.
	assert.JSONEq(t, `{
		"plain": {"content": "Hi there", "finish": "stop", "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}, "sum": true},
		"streamWithUsage": {"content": "Hello", "finish": "stop", "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}, "usageChunks": 1},
		"streamKeepAliveMultiLine": {"content": "AB", "finish": "stop", "usage": null, "usageChunks": 0},
		"refusal": {"status": 400, "type": "invalid_request_error", "hasMessage": true},
		"big": {"contentLength": 262145, "argsLength": 262145, "argsFill": true, "finish": "tool_calls"}
	}`, string(out))
	assert.Len(t, w.Rejections(), 1)
}
