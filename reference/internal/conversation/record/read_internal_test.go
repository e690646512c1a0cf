package record

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// mayHoldRec says false only for objects encoding/json finds no "rec" member in: a record's
// value, one with the member elsewhere or in another case, or spelt with an escape, is looked at.
func TestMayHoldRecMissesNoRecord(t *testing.T) {
	for _, v := range []string{
		`{"rec":{"ord":1},"turns":1}`,
		`{"turns":1,"rec":{"ord":1}}`,
		`{"REC":{"ord":1}}`,
		`{"Rec":{"ord":1}}`,
		`{"r\u0065c":{"ord":1}}`,
		`{"a":"\u003c","b":1}`,
	} {
		require.True(t, mayHoldRec([]byte(v)), v)
		checkMayHoldRec(t, []byte(v))
	}
	for _, v := range []string{
		`{"ok":true,"turns":0,"envelope":{"text":"a record of rec"}}`,
		`{"recall":1}`,
		`{"a":"rec"}`,
		`{}`,
	} {
		checkMayHoldRec(t, []byte(v))
	}
	require.False(t, mayHoldRec([]byte(`{"ok":true,"turns":0}`)))
	require.False(t, mayHoldRec([]byte(`{"recall":{"ord":1}}`)))
}

// checkMayHoldRec fails when mayHoldRec says no for a value encoding/json finds a record in.
func checkMayHoldRec(t *testing.T, v []byte) {
	t.Helper()
	var got struct {
		Rec *Stored `json:"rec"`
	}
	if json.Unmarshal(v, &got) == nil && got.Rec != nil {
		require.True(t, mayHoldRec(v), "%s holds a record", v)
	}
}

func FuzzMayHoldRec(f *testing.F) {
	f.Add([]byte(`{"rec":{"ord":1}}`))
	f.Add([]byte(`{"x":1,"rEc":{}}`))
	f.Add([]byte(`{"r\u0065c":{}}`))
	f.Fuzz(func(t *testing.T, v []byte) { checkMayHoldRec(t, v) })
}
