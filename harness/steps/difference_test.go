package steps

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFirstDifference(t *testing.T) {
	require.Empty(t, firstDifference("same", "same"))
	require.Equal(t, `first difference at character 3: got "abcdef", want "abXdef"`, firstDifference("abcdef", "abXdef"))
	require.Equal(t, `first difference at character 4: got the end (after "abc"), want "abcd"; got 3 characters, want 4`,
		firstDifference("abc", "abcd"))
	require.Equal(t, `first difference at character 1: got the end (an empty text), want "x"; got 0 characters, want 1`,
		firstDifference("", "x"))
	// Two rendered tables: the line and column of the first difference, and only the text near it.
	got := "\n  | 1 | user | hi |\n  | 2 | assistant | Hello, alice |"
	want := "\n  | 1 | user | hi |\n  | 2 | assistant | Hello, alice! |"
	require.Equal(t, `first difference at character 54 (line 3, column 33): got …"Hello, alice |", want …"Hello, alice! |"; got 55 characters, want 56`,
		firstDifference(got, want))
	// Characters, not bytes: a four-byte character counts once.
	long := strings.Repeat("é", 100)
	note := firstDifference(long+"😀a", long+"😀b")
	require.True(t, strings.HasPrefix(note, "first difference at character 102: "), note)
	require.NotContains(t, note, "characters, want")
}

func TestLengthNotes(t *testing.T) {
	require.Equal(t, "quoted 499 characters, want 500", lengthNote("quoted", 499, 500))
	require.Empty(t, lengthNote("quoted", 500, 500))
	n, ok := quotedLength(`[This message edits the user's earlier message "` + strings.Repeat("a", 499) + `".]` + "\nsays")
	require.True(t, ok)
	require.Equal(t, 499, n)
	n, ok = quotedLength(`[This message edits the user's earlier message "a\"b😀".]`)
	require.True(t, ok)
	require.Equal(t, 4, n)
	_, ok = quotedLength("a plain message")
	require.False(t, ok)
	f := &Failure{Op: "the reply", Got: "a", Want: "b", Detail: "first difference at character 1"}
	require.Equal(t, "the reply: got a, want b; first difference at character 1", f.Error())
}
