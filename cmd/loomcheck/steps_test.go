package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
)

// TestStepsListsTheVocabulary: `steps --format json` lists every step of the kit with its area
// and meaning, `steps` (text) every pattern under its area, each area's file exists, and words
// and --area narrow the list.
func TestStepsListsTheVocabulary(t *testing.T) {
	want := harness.Vocabulary()
	require.Greater(t, len(want), 200)

	code, out, errOut := run(t, "steps", "--format", "json")
	require.Equal(t, exitConformant, code, errOut)
	var got []harness.Step
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, want, got)

	code, text, errOut := run(t, "steps")
	require.Equal(t, exitConformant, code, errOut)
	for _, st := range want {
		require.NotEmpty(t, st.Meaning, st.Pattern)
		require.Contains(t, text, "\n  "+st.Pattern+"\n      "+st.Meaning+"\n")
	}
	for _, a := range areasOf(want) {
		require.Contains(t, text, a+" (")
		_, err := os.Stat("../../harness/steps/" + a + ".go")
		require.NoError(t, err, "the area %s has its file", a)
	}

	code, out, _ = run(t, "steps", "TOOL", "fails", "--format", "json")
	require.Equal(t, exitConformant, code)
	got = nil
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotEmpty(t, got)
	n := 0
	for _, st := range want {
		if holdsAll(st, []string{"tool", "fails"}) {
			n++
			require.Contains(t, strings.ToLower(st.Pattern+st.Meaning), "fails")
		}
	}
	require.Len(t, got, n)

	code, out, _ = run(t, "steps", "--area", "conversation_edits", "--format", "json")
	require.Equal(t, exitConformant, code)
	got = nil
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotEmpty(t, got)
	for _, st := range got {
		require.Equal(t, "conversation_edits", st.Area)
	}

	code, _, errOut = run(t, "steps", "--area", "nowhere")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `no area "nowhere"`)
	code, _, _ = run(t, "steps", "--format", "yaml")
	require.Equal(t, exitUsage, code)
}
