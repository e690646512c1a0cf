package conversation

import (
	"regexp"
	"strings"
	"testing"
)

// idInputs are strings at and around every bound of the id rules: each length from 0 to 130,
// every byte at the first and at a later position.
func idInputs() []string {
	var out []string
	for n := 0; n <= 130; n++ {
		out = append(out, strings.Repeat("a", n), strings.Repeat(" ", n))
	}
	for c := 0; c < 256; c++ {
		out = append(out, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	return append(out, "é", "a.b_c-d", "-a", ".a", strings.Repeat("x", 127)+"!")
}

// TestIDRulesAreTheDocumentedExpressions: the hand-written checks accept exactly what the
// expressions spec/http.md states accept.
func TestIDRulesAreTheDocumentedExpressions(t *testing.T) {
	id := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	msg := regexp.MustCompile(`^[\x20-\x7e]{1,128}$`)
	for _, s := range idInputs() {
		if got, want := ValidID(s), id.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
		if got, want := validMessageID(s), msg.MatchString(s); got != want {
			t.Errorf("validMessageID(%q) = %v, want %v", s, got, want)
		}
	}
}
