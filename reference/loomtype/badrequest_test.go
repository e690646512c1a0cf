package loomtype_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A bad request names its field, is found by errors.As through any wrapping, and matches
// ErrBadRequest; what an answer shows is its reason, or the field when there is no reason.
func TestBadRequestNamesItsField(t *testing.T) {
	err := fmt.Errorf("start: %w", loomtype.BadRequest("mode", "unknown mode"))
	require.ErrorIs(t, err, loomtype.ErrBadRequest)
	var br *loomtype.BadRequestError
	require.ErrorAs(t, err, &br)
	require.Equal(t, loomtype.BadRequestError{Field: "mode", Reason: "unknown mode"}, *br)
	require.Equal(t, "unknown mode", br.Detail())

	err = loomtype.BadRequest("messageId", "")
	require.ErrorAs(t, err, &br)
	require.Equal(t, "messageId", br.Detail())
	require.Equal(t, "loom: bad request: messageId", err.Error())
	require.NotErrorIs(t, err, loomtype.ErrConflict)
}
