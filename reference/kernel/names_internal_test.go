package kernel

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameRuleIsTheDocumentedExpression: validName accepts exactly what ^[^\x00-\x1f\x7f]{1,256}$
// accepts, at and around the bound in characters (ASCII and wider) and for every byte.
func TestNameRuleIsTheDocumentedExpression(t *testing.T) {
	re := regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,256}$`)
	var in []string
	for _, n := range []int{0, 1, 2, 255, 256, 257, 300} {
		in = append(in, strings.Repeat("a", n), strings.Repeat("é", n), strings.Repeat("\xff", n))
	}
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		in = append(in, b, "a"+b, b+"a", strings.Repeat("a", 255)+b)
	}
	for _, s := range in {
		if got, want := validName(s), re.MatchString(s); got != want {
			t.Errorf("validName(%q) = %v, want %v", s, got, want)
		}
	}
}
