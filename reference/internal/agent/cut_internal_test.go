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

// bound keeps at most MaxErrorText bytes, backing off to a character boundary.
func TestBound(t *testing.T) {
	n := MaxErrorText
	require.Equal(t, strings.Repeat("a", n), bound(strings.Repeat("a", n)), "N bytes: kept")
	require.Equal(t, strings.Repeat("a", n), bound(strings.Repeat("a", n+1)), "N+1 bytes: the first N")
	// "a" then two-byte characters: byte N is the middle of a character, so the cut backs off one.
	s := "a" + strings.Repeat("é", n/2)
	require.Len(t, s, n+1)
	require.Equal(t, "a"+strings.Repeat("é", n/2-1), bound(s))
	// Three-byte characters: the cut backs off to the start of the one it would split.
	s = strings.Repeat("€", n) // 3 bytes each
	got := bound(s)
	require.Equal(t, strings.Repeat("€", n/3), got)
	// Nothing but continuation bytes: no boundary at all, so nothing is kept (and nothing panics).
	require.Equal(t, "", bound(strings.Repeat("\x80", n+1)))
}
