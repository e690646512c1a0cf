package world_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/model"
)

// afterCall is the request a system sends once it has run call: the question, the model's call
// and the call's result.
func afterCall(question string, call model.ToolCall) []model.Message {
	return append(userMsgs(question),
		model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call}},
		model.Message{Role: model.RoleTool, ToolCallID: call.ID, Content: `{"sent":true}`})
}

// A system that serves scenario after scenario may ask the model about a call it was answered
// with before the last reset (the request after the call's result, late): that request belongs
// to no scenario that runs now, so it takes nothing scripted since the reset, and it is neither
// recorded nor counted.
func TestModelLeavesARequestAboutAnEarlierCallAlone(t *testing.T) {
	w := start(t, world.Options{})
	c := client(w, false)
	require.NoError(t, w.Model().EnqueueFor("Ask once more",
		world.Reply{ToolCalls: []world.ToolCall{{ID: "call_3-run7", Name: "peer.send", Arguments: `{"text":"hi"}`}}}))
	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("Ask once more")}, nil)
	require.NoError(t, err)
	require.Len(t, resp.ToolCalls, 1)
	earlier := resp.ToolCalls[0]

	w.Reset()
	require.NoError(t, w.Model().EnqueueFor("Ask once more", world.Reply{Text: "for the scenario that runs now"}))
	resp, err = c.Complete(bounded(t), model.Request{Messages: afterCall("Ask once more", earlier)}, nil)
	require.NoError(t, err)
	assert.Equal(t, "re: Ask once more", resp.Content, "the late request gets the default reply")
	assert.Zero(t, w.Model().Count(), "the late request is not counted")
	assert.Empty(t, w.Model().Requests())
	assert.Equal(t, 1, w.Model().Pending(), "the late request took nothing scripted")

	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("Ask once more")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "for the scenario that runs now", resp.Content)
	assert.Equal(t, 1, w.Model().Count())
}

// A call id answered before the reset and again after it is the current generation's: a request
// that carries it is recorded and answered from the script as before.
func TestModelCountsARequestAboutACallIdServedAgain(t *testing.T) {
	w := start(t, world.Options{})
	c := client(w, false)
	call := world.Reply{ToolCalls: []world.ToolCall{{Name: "peer.send", Arguments: `{}`}}}
	require.NoError(t, w.Model().Enqueue(call))
	_, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("one")}, nil)
	require.NoError(t, err)

	w.Reset()
	require.NoError(t, w.Model().Enqueue(call, world.Reply{Text: "done"}))
	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("one")}, nil)
	require.NoError(t, err)
	require.Len(t, resp.ToolCalls, 1)
	assert.Equal(t, "call_1_1", resp.ToolCalls[0].ID, "the same id as before the reset")
	resp, err = c.Complete(bounded(t), model.Request{Messages: afterCall("one", resp.ToolCalls[0])}, nil)
	require.NoError(t, err)
	assert.Equal(t, "done", resp.Content)
	assert.Equal(t, 2, w.Model().Count())
}
