package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The bounds are part of what is recorded: a replay serves the recorded, already cut text, and
// another engine reading the same record must agree on where the cut fell.
func TestBoundsAreTheDocumentedOnes(t *testing.T) {
	require.Equal(t, 262144, MaxResponseChars)
	require.Equal(t, 2000, MaxErrorText)
}

// cutText keeps a response of exactly MaxResponseChars characters (not bytes) and cuts a longer
// one after that many characters, at a character boundary, with CutMarker.
func TestCutText(t *testing.T) {
	ascii := strings.Repeat("a", MaxResponseChars)
	require.Equal(t, ascii, cutText(ascii), "N characters: kept")
	require.Equal(t, ascii+CutMarker, cutText(ascii+"b"), "N+1 characters: cut after N")

	wide := strings.Repeat("é", MaxResponseChars) // 2 bytes each: longer than N bytes, but N characters
	require.Equal(t, wide, cutText(wide), "N two-byte characters: kept whole")
	require.Equal(t, wide+CutMarker, cutText(wide+"é"), "N+1 two-byte characters: cut after N")
	mixed := "x" + strings.Repeat("é", MaxResponseChars)
	require.Equal(t, "x"+strings.Repeat("é", MaxResponseChars-1)+CutMarker, cutText(mixed))
	require.Equal(t, "", cutText(""))
	require.Equal(t, "short", cutText("short"))
}

// bound keeps the first MaxErrorText characters, whatever their encoding: N kept, N+1 cut to N,
// in one-, two-, three- and four-byte characters, and a two-byte character at the very end.
func TestBound(t *testing.T) {
	n := MaxErrorText
	for _, ch := range []string{"a", "é", "€", "😀"} {
		require.Equal(t, strings.Repeat(ch, n), bound(strings.Repeat(ch, n)), "%q: N characters kept", ch)
		require.Equal(t, strings.Repeat(ch, n), bound(strings.Repeat(ch, n+1)), "%q: N+1 characters, the first N", ch)
		require.Equal(t, strings.Repeat(ch, n-1), bound(strings.Repeat(ch, n-1)), "%q: N-1 characters kept", ch)
	}
	s := strings.Repeat("a", n-1) + "é"
	require.Equal(t, s, bound(s), "N characters, N+1 bytes: kept")
	require.Equal(t, s, bound(s+"x"), "N+1 characters: the first N")
	// Bytes that are no character count one each.
	require.Equal(t, strings.Repeat("\x80", n), bound(strings.Repeat("\x80", n+1)))
	require.Equal(t, "", bound(""))
}
