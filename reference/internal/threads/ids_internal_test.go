package threads

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameRulesAreTheDocumentedExpressions: the hand-written checks accept exactly what the
// expressions of spec/peer.md accept, at and around every bound and for every byte.
func TestNameRulesAreTheDocumentedExpressions(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	thread := regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)
	message := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	var in []string
	for n := 0; n <= 66; n++ {
		in = append(in, strings.Repeat("a", n), strings.Repeat("A", n), strings.Repeat("_", n))
	}
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		in = append(in, b, strings.Repeat("a", 15)+b, b+strings.Repeat("a", 15))
	}
	for _, s := range in {
		if got, want := ValidName(s), name.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
		if got, want := validThread(s), thread.MatchString(s); got != want {
			t.Errorf("validThread(%q) = %v, want %v", s, got, want)
		}
		if got, want := validMessage(s), message.MatchString(s); got != want {
			t.Errorf("validMessage(%q) = %v, want %v", s, got, want)
		}
	}
}
