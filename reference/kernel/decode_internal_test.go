package kernel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeDecision reads every decision as encoding/json does: the shape the kernel writes without
// decoding the value, anything else through encoding/json.
func TestDecodeDecisionReadsAsJSONDoes(t *testing.T) {
	written := func(id string, v string, inner ...string) []byte {
		b, err := json.Marshal(evDecision{ID: id, Value: json.RawMessage(v), Inner: inner})
		require.NoError(t, err)
		return b
	}
	cases := [][]byte{
		written("conv#o1:verify", `{"ok":true,"turns":0}`),
		written("clock", `1712`),
		written("n", `null`),
		written("arr", `[1,2,3]`),
		written("s", `"a string with \"quotes\" and ]}"`),
		written("with inner", `{"a":1}`, "step#1", "step#2"),
		written("esc\"aped", `true`),
		written("<html>&", `{"x":"<b>"}`),
		written("ünï", `{}`),
		[]byte(`{"id":"x","value":1,"junk":2}`),
		[]byte(`{"id":"x","value":{"a":1}}  `),
		[]byte(`{"id":"x","value": {"a":1}}`),
		[]byte(`{"value":1,"id":"x"}`),
		[]byte(`{"id":"x","value":}`),
		[]byte(`{"id":"x","value":{]}`),
		[]byte(`{"id":"x\u0041","value":2}`),
		[]byte(`{"id":"x","value":2,"inner":["a"]}`),
		[]byte(`{"id":"x"}`),
		[]byte(`not json`),
		[]byte(`{"id":"`),
	}
	for _, c := range cases {
		checkDecodeDecision(t, c)
	}
}

func checkDecodeDecision(t *testing.T, data []byte) {
	t.Helper()
	var want evDecision
	werr := json.Unmarshal(data, &want)
	got, gerr := decodeDecision(data)
	if werr != nil {
		require.Error(t, gerr, "%s", data)
		return
	}
	require.NoError(t, gerr, "%s", data)
	require.Equal(t, want.ID, got.ID, "%s", data)
	require.Equal(t, string(want.Value), string(got.Value), "%s", data)
	require.Equal(t, want.Inner, got.Inner, "%s", data)
}

func FuzzDecodeDecision(f *testing.F) {
	f.Add([]byte(`{"id":"conv#o1:user","value":{"rec":{"ord":1}}}`))
	f.Add([]byte(`{"id":"x","value":[1],"inner":["s"]}`))
	f.Add([]byte(`{"id":"x","value":1,"junk":2}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeDecision(t, data) })
}

// StoredInfo decodes a record once and answers the same Info while its bytes stay the same; new
// bytes are decoded anew, and what it answers is the caller's to change.
func TestDecodedInfosFollowTheBytes(t *testing.T) {
	var d decodedInfos
	raw := []byte(`{"id":"c1","flow":"f","principal":{"tenant":"t","actor":"a"},"state":"open","gen":0,"created":5}`)
	in, err := d.info("c1", raw)
	require.NoError(t, err)
	require.Equal(t, Info{ID: "c1", Flow: "f", State: "open", Created: 5, Principal: in.Principal}, in)
	require.Equal(t, "a", in.Principal.Actor)
	raw[len(raw)-2] = '6' // the caller's buffer changes: the kept copy does not
	in, err = d.info("c1", []byte(`{"id":"c1","flow":"f","principal":{"tenant":"t","actor":"a"},"state":"open","gen":0,"created":5}`))
	require.NoError(t, err)
	require.EqualValues(t, 5, in.Created)
	ended := []byte(`{"id":"c1","flow":"f","principal":{"tenant":"t","actor":"a"},"state":"completed","gen":2,"created":5,"output":{"n":1}}`)
	in, err = d.info("c1", ended)
	require.NoError(t, err)
	require.Equal(t, "completed", in.State)
	require.EqualValues(t, 2, in.Gen)
	in.Output[1] = 'X'
	again, err := d.info("c1", ended)
	require.NoError(t, err)
	require.Equal(t, `{"n":1}`, string(again.Output))
	_, err = d.info("c2", []byte(`{"id":`))
	require.Error(t, err)
	for i := range 3 * decodedKept {
		_, err := d.info(string(rune('a'+i%26))+string(rune(i)), raw)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(d.cur)+len(d.old), 2*decodedKept)
}

// encodeDecision writes exactly what json.Marshal writes, and fails where it fails.
func TestEncodeDecisionWritesAsJSONDoes(t *testing.T) {
	for _, d := range []evDecision{
		{ID: "conv#o1:verify", Value: json.RawMessage(`{"ok":true,"turns":0}`)},
		{ID: "x", Value: json.RawMessage(` { "a" : [1, 2] ,"b":"c d" } `)},
		{ID: "x", Value: json.RawMessage(`"<b>&amp;</b>"`)},
		{ID: "x", Value: json.RawMessage("\"line\u2028sep\u2029\"")},
		{ID: "x<y", Value: json.RawMessage(`1`)},
		{ID: "é", Value: json.RawMessage(`1`)},
		{ID: "q\"uote", Value: json.RawMessage(`1`)},
		{ID: "inner", Value: json.RawMessage(`{}`), Inner: []string{"s1", "s2"}},
		{ID: "bad", Value: json.RawMessage(`{"a":`)},
		{ID: "bad2", Value: json.RawMessage(`1 2`)},
		{ID: "bad3", Value: json.RawMessage(`"\xff"`)},
		{ID: "null", Value: json.RawMessage(`null`)},
	} {
		checkEncodeDecision(t, d)
	}
}

func checkEncodeDecision(t *testing.T, d evDecision) {
	t.Helper()
	want, werr := json.Marshal(d)
	got, gerr := encodeDecision(d)
	if werr != nil {
		require.Error(t, gerr, "%q", d.Value)
		return
	}
	require.NoError(t, gerr, "%q", d.Value)
	require.Equal(t, string(want), string(got), "%q %q", d.ID, d.Value)
}

func FuzzEncodeDecision(f *testing.F) {
	f.Add("conv#o1:user", []byte(`{"rec":{"ord":1,"text":"a <b>"}}`))
	f.Add("x", []byte(` [1, {"a" : "b"}] `))
	f.Fuzz(func(t *testing.T, id string, v []byte) {
		if len(v) == 0 {
			return // Decide writes null for an empty value before it encodes
		}
		checkEncodeDecision(t, evDecision{ID: id, Value: v})
	})
}

// What json.Marshal wrote is recorded by encodeMarshaled exactly as json.Marshal writes the
// decision holding it: values whose encoding escapes HTML, separators, bad UTF-8 and quotes, a
// Marshaler whose output is not compact, and ids that need escaping (written the long way).
func TestEncodeMarshaledWritesAsJSONDoes(t *testing.T) {
	type rec struct {
		Text  string            `json:"text"`
		Tags  []string          `json:"tags"`
		Extra map[string]any    `json:"extra,omitempty"`
		Raw   json.RawMessage   `json:"raw,omitempty"`
		Ptr   *int64            `json:"ptr"`
		Set   map[string]string `json:"set"`
	}
	seven := int64(7)
	values := []any{
		nil, true, 0, -1.5e300, "", "plain", "a <b> & c", "line\u2028sep\u2029", "bad \xff utf-8", "q\"uote\\ \n\t\x00",
		[]any{1, "x", nil, map[string]int{"b": 2, "a": 1}},
		rec{Text: "<script>", Tags: nil, Raw: json.RawMessage(` { "a" : [ 1 , 2 ] } `), Ptr: &seven, Set: map[string]string{"z": "&", "é": "\u2028"}},
		map[string]any{"rec": map[string]any{"ord": 1, "text": "é\u00e9"}, "turns": 3},
	}
	for _, id := range []string{"conv#o1:user", "x<y", "é", "q\"uote", ""} {
		for _, x := range values {
			v, err := json.Marshal(x)
			require.NoError(t, err)
			checkEncodeMarshaled(t, evDecision{ID: id, Value: v})
		}
	}
	checkEncodeMarshaled(t, evDecision{ID: "inner", Value: json.RawMessage(`{}`), Inner: []string{"s1", "s2"}})
}

func checkEncodeMarshaled(t *testing.T, d evDecision) {
	t.Helper()
	want, err := json.Marshal(d)
	require.NoError(t, err)
	got, err := encodeMarshaled(d)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%q %q", d.ID, d.Value)
}

func FuzzEncodeMarshaled(f *testing.F) {
	f.Add("conv#o1:verify", "a <b> & \u2028", 3.5)
	f.Add("x\"y", "\xff\x00", -1.0)
	f.Fuzz(func(t *testing.T, id, s string, n float64) {
		for _, x := range []any{s, map[string]any{s: n, "k": []string{s}}} {
			v, err := json.Marshal(x)
			if err != nil {
				return // NaN and the infinities have no encoding
			}
			checkEncodeMarshaled(t, evDecision{ID: id, Value: v})
		}
	})
}
