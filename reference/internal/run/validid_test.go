package run_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/run"
)

// A run id a caller chooses is 1 to 96 characters of letters, digits, '.', '_' and '-', the first
// a letter or a digit (the pattern of spec/openapi.yaml): every bound and every kind of character
// on both sides.
func TestValidID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"7", true},
		{"Z.z_9-", true},
		{strings.Repeat("a", 96), true},
		{strings.Repeat("a", 97), false},
		{"", false},
		{".a", false},
		{"_a", false},
		{"-a", false},
		{"a b", false},
		{"a:b", false},
		{"a/b", false},
		{"é", false},
		{"aé", false},
		{"a\x00", false},
	} {
		require.Equal(t, c.ok, run.ValidID(c.id), "%q", c.id)
	}
}
