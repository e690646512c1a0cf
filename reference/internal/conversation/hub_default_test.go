package conversation_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestDefaultHubAdmits64StreamsPerConversation: without a hub of the embedder's, the
// conversations get one that admits 64 live subscribers per conversation and refuses the 65th
// with a typed limit.
func TestDefaultHubAdmits64StreamsPerConversation(t *testing.T) {
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{bytes.Repeat([]byte{7}, 32)}}, conversation.Deps{}, nil)
	require.NoError(t, err)
	for i := range 64 {
		_, err := dl.Hub().Subscribe("c1", 0)
		require.NoError(t, err, fmt.Sprintf("subscriber %d", i+1))
	}
	_, err = dl.Hub().Subscribe("c1", 0)
	var le *loomtype.LimitError
	require.True(t, errors.As(err, &le), "the 65th subscriber: got %v, want a *loomtype.LimitError", err)
	require.Equal(t, int64(64), le.Max)
}
