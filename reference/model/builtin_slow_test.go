package model_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/model"
)

// TestBuiltinSlowWaitsBeforeEachPiece: the same answer as Builtin, each piece a delay after the
// one before; a ctx that ends during a wait stops it at once with the text so far.
func TestBuiltinSlowWaitsBeforeEachPiece(t *testing.T) {
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "one two three"}}}
	want, err := model.Builtin().Complete(context.Background(), req, nil)
	require.NoError(t, err)
	var at []time.Duration
	began := time.Now()
	got, err := model.BuiltinSlow(60*time.Millisecond).Complete(context.Background(), req, func(string) { at = append(at, time.Since(began)) })
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Len(t, at, 5) // `You`, ` said:`, ` "one`, ` two`, ` three"`
	for i, d := range at {
		require.GreaterOrEqual(t, d, time.Duration(i+1)*60*time.Millisecond, "piece %d", i)
	}
	// Cancelled right after the first piece, during the (long) wait for the second.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began = time.Now()
	part, err := model.BuiltinSlow(2*time.Second).Complete(ctx, req, func(string) { cancel() })
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, "You", part.Content)
	require.Less(t, time.Since(began), 4*time.Second, "the wait for the second piece ends with the context")
}
