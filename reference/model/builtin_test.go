package model

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinIsDeterministic(t *testing.T) {
	req := Request{Messages: []Message{
		{Role: RoleUser, Content: "earlier"},
		{Role: RoleAssistant, Content: "x"},
		{Role: RoleUser, Content: "what is the time"},
	}}
	var deltas []string
	a, err := Builtin().Complete(context.Background(), req, func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	b, err := Builtin().Complete(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Equal(t, Response{Content: `You said: "what is the time"`, FinishReason: FinishStop}, a)
	assert.Greater(t, len(deltas), 2, "streamed in several pieces")
	assert.Equal(t, a.Content, strings.Join(deltas, ""))
	assert.Equal(t, []string{"You", " said:", ` "what`, " is", " the", ` time"`}, deltas)
	assert.Nil(t, a.ToolCalls)
}

func TestBuiltinTruncatesAndHandlesNoUser(t *testing.T) {
	long := strings.Repeat("é", BuiltinEchoRunes+50)
	resp, err := Builtin().Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: long}}}, nil)
	require.NoError(t, err)
	assert.Equal(t, `You said: "`+strings.Repeat("é", BuiltinEchoRunes)+`"`, resp.Content)

	resp, err = Builtin().Complete(context.Background(), Request{}, nil)
	require.NoError(t, err)
	assert.Equal(t, `You said: ""`, resp.Content)
}

func TestBuiltinStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := Request{Messages: []Message{{Role: RoleUser, Content: "one two three four"}}}
	resp, err := Builtin().Complete(ctx, req, func(s string) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "You", resp.Content)
}
