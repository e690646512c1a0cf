package kernel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
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

// TestARowKeepsTheDecisionThenSplitsBack: mergeThen keeps a decision after a decision row or a
// consumed row (alone or with its version 4 decision) and splitThen gives both back byte for
// byte, as commandsOf gives the commands; a row keeps one such decision at most, a decision with
// inner steps is not kept, and other data does not split.
func TestARowKeepsTheDecisionThenSplitsBack(t *testing.T) {
	then := `{"id":"o1:user","value":{"rec":{"text":"}}\"then\":{"},"turns":1}}`
	for _, c := range []struct {
		kind, row string
		cmds      int
	}{
		{kindDecision, `{"id":"o1#turn:1:response","value":{"content":"hi"}}`, 2},
		{kindDecision, `{"id":"x","value":null,"inner":["a","b"]}`, 2},
		{kindConsumed, `{"seq":1}`, 2},
		{kindConsumed, `{"seq":12,"id":"o12:verify","value":{"ok":true,"turns":3}}`, 3},
	} {
		row, ok := mergeThen([]byte(c.row), []byte(then))
		require.True(t, ok, "%s + %s", c.row, then)
		gotRow, gotThen, ok := splitThen(row)
		require.True(t, ok, "%s", row)
		require.Equal(t, c.row, string(gotRow))
		require.Equal(t, then, string(gotThen))
		_, ok = mergeThen(row, []byte(then))
		require.False(t, ok, "a row keeps one decision after it: %s", row)
		cmds := commandsOf(store.Event{Kind: c.kind, Seq: 7, Data: row})
		require.Len(t, cmds, c.cmds, "%s", row)
		last := cmds[len(cmds)-1]
		require.Equal(t, kindDecision, last.Kind)
		require.Equal(t, then, string(last.Data))
		for _, cmd := range cmds {
			require.EqualValues(t, 7, cmd.Seq, "every command at the row's place")
		}
	}
	for _, c := range []struct{ row, decision string }{
		{`{"id":"x","value":1}`, `{"id":"y","value":2,"inner":["s"]}`},
		{`{"id":"x","value":1}`, `{"value":2,"id":"y"}`},
		{`{"id":"x","value":1`, `{"id":"y","value":2}`},
		{`x`, `{"id":"y","value":2}`},
	} {
		_, ok := mergeThen([]byte(c.row), []byte(c.decision))
		require.False(t, ok, "%s + %s", c.row, c.decision)
	}
	for _, data := range []string{`{"id":"x","value":{"then":{"id":"y","value":1}}}`, `{"then":{"id":"y","value":1},"id":"x","value":1}`,
		`{"id":"x","value":1,"then":{"id":"y","value":1},"z":1}`, `{"id":"x","value":1, "then":{"id":"y","value":1}}`,
		`{"id":"x","value":1,"then":{"id":"y","value":1}} `, `{"id":"x","value":1,"then":{"id":"y","value":1}}}`, `{}`} {
		_, _, ok := splitThen([]byte(data))
		require.False(t, ok, data)
	}
}
