package kernel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAJoinedRowSplitsBackIntoWhatWasJoined: mergeConsumed keeps a consumed event and the
// decision after it in one row that splitConsumed gives back byte for byte; any other pair stays
// apart, and any other consumed data does not split.
func TestAJoinedRowSplitsBackIntoWhatWasJoined(t *testing.T) {
	for _, c := range []struct{ consumed, decision string }{
		{`{"seq":1}`, `{"id":"o1:verify","value":{"ok":true,"turns":0}}`},
		{`{"seq":907}`, `{"id":"x","value":null,"inner":["a"]}`},
	} {
		row, ok := mergeConsumed([]byte(c.consumed), []byte(c.decision))
		require.True(t, ok, "%s + %s", c.consumed, c.decision)
		gotC, gotD, ok := splitConsumed(row)
		require.True(t, ok, "%s", row)
		require.Equal(t, c.consumed, string(gotC))
		require.Equal(t, c.decision, string(gotD))
	}
	for _, c := range []struct{ consumed, decision string }{
		{`{"seq":0}`, `{"id":"x","value":1}`},
		{`{"seq":01}`, `{"id":"x","value":1}`},
		{`{"seq":1,"x":2}`, `{"id":"x","value":1}`},
		{`{"sender":{},"seq":1}`, `{"id":"x","value":1}`},
		{`{"seq":1}`, `{"value":1,"id":"x"}`},
		{`{"seq":1}`, `{"id":"x","value":1`},
	} {
		_, ok := mergeConsumed([]byte(c.consumed), []byte(c.decision))
		require.False(t, ok, "%s + %s", c.consumed, c.decision)
	}
	for _, data := range []string{`{"seq":1}`, `{"seq":1,"payload":"x"}`, `{"seq":1,"id":"x"`, `{"seq":x,"id":"x","value":1}`, `{}`} {
		_, _, ok := splitConsumed([]byte(data))
		require.False(t, ok, data)
	}
}
