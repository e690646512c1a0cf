package loomtype_test

import (
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestValidName: the bound at max and max+1, the first byte and every other byte's class, and
// bytes outside ASCII (a multi-byte letter counts its bytes and is refused).
func TestValidName(t *testing.T) {
	for _, c := range []struct {
		s   string
		max int
		ok  bool
	}{
		{"", 4, false},
		{"a", 4, true},
		{"Z9._-", 5, true},
		{"abcd", 4, true},
		{"abcde", 4, false},
		{strings.Repeat("a", 128), 128, true},
		{strings.Repeat("a", 129), 128, false},
		{".a", 4, false},
		{"_a", 4, false},
		{"-a", 4, false},
		{"0a", 4, true},
		{"a b", 4, false},
		{"a/b", 4, false},
		{"a:b", 4, false},
		{"aé", 4, false},
		{"a😀", 8, false},
		{"a\x00", 4, false},
		// each end of each range of the grammar, and the byte just outside it
		{"A", 1, true}, {"Z", 1, true}, {"a", 1, true}, {"z", 1, true}, {"0", 1, true}, {"9", 1, true},
		{"xAZaz09", 7, true},
		{"@", 1, false}, {"[", 1, false}, {"`", 1, false}, {"{", 1, false}, {"/", 1, false}, {":", 1, false},
		{"x@", 2, false}, {"x[", 2, false}, {"x`", 2, false}, {"x{", 2, false}, {"x/", 2, false}, {"x:", 2, false},
	} {
		if got := loomtype.ValidName(c.s, c.max); got != c.ok {
			t.Errorf("ValidName(%q, %d) = %v, want %v", c.s, c.max, got, c.ok)
		}
	}
}
