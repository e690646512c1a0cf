package steps

import "testing"

// TestStepPatternsCompiledOnce: every pattern of the vocabulary has its compiled expression, of
// the same text, and every scenario gets the very same compiled expressions, not new ones.
func TestStepPatternsCompiledOnce(t *testing.T) {
	first, again := stepPatterns(), stepPatterns()
	voc := Vocabulary()
	if len(voc) == 0 {
		t.Fatal("the vocabulary is empty")
	}
	for _, st := range voc {
		re := first[st.Pattern]
		if re == nil {
			t.Errorf("pattern %s (%s) has no compiled expression", st.Pattern, st.Area)
			continue
		}
		if re.String() != st.Pattern {
			t.Errorf("pattern %s (%s) is compiled as %s", st.Pattern, st.Area, re.String())
		}
		if again[st.Pattern] != re {
			t.Errorf("pattern %s (%s) is compiled again on a second use", st.Pattern, st.Area)
		}
	}
}
