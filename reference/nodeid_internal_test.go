package reference

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A node id is 1 to 64 letters, digits, '.', '_' or '-', any of them first (node.id's pattern in
// schemas/sut-config.schema.json): every bound and every kind of character on both sides.
func TestValidNodeID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"n", true},
		{"node-1", true},
		{".a_B-9", true},
		{strings.Repeat("n", 64), true},
		{strings.Repeat("n", 65), false},
		{"", false},
		{"node 1", false},
		{"node:1", false},
		{"node/1", false},
		{"nöde", false},
		{"node\n", false},
	} {
		require.Equal(t, c.ok, validNodeID(c.id), "%q", c.id)
	}
}
