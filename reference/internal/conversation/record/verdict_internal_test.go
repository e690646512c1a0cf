package record

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// sameVerdictAsEncodingJSON fails unless DecodeVerdict and json.Unmarshal into an empty Verdict
// agree on b: the same value, and an error exactly where encoding/json has one.
func sameVerdictAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	var want Verdict
	errWant := json.Unmarshal(b, &want)
	got, errGot := DecodeVerdict(b)
	require.Equal(t, errWant == nil, errGot == nil, "error of %s: %v, want %v", b, errGot, errWant)
	require.True(t, reflect.DeepEqual(want, got), "%s:\n got %#v\nwant %#v", b, got, want)
}

// jsonNames are the JSON names of typ's fields, in order.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// TestVerdictKeysFollowVerdict: the one-pass reader knows every field of Verdict, EnvelopeJSON
// and the envelope's identity, by the name and in the order json.Marshal writes it.
func TestVerdictKeysFollowVerdict(t *testing.T) {
	require.Equal(t, jsonNames(reflect.TypeFor[Verdict]()), verdictKeys)
	require.Equal(t, jsonNames(reflect.TypeFor[EnvelopeJSON]()), envelopeKeys)
	require.Equal(t, jsonNames(reflect.TypeFor[envelope.Identity]()), identityKeys)
}

// verdicts are verdicts as the dialogue writes them: refused with a reason, accepted with an
// envelope with and without its optional fields, texts with what json.Marshal escapes and what it
// writes as it is; each with and without a turn count.
func verdicts() []Verdict {
	n := func(v int64) *int64 { return &v }
	full := EnvelopeJSON{ConversationID: "c-1", Kind: "message", ID: "m-1", IAT: 1_796_000_000_000,
		Text:  `You said: "hi" \ <b>&amp;</b>` + "\n\t\r\b\f\x00\x1f\u2028\u2029 é 日本 🎉 \ufffd",
		Asker: envelope.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}, EditOf: n(3), Sig: "c2ln+/="}
	bare := EnvelopeJSON{Kind: "close", Asker: envelope.Identity{Actor: "alice"}}
	var out []Verdict
	for _, v := range []Verdict{
		{},
		{OK: false, Reason: loomtype.Reason("bad-signature")},
		{OK: true, Envelope: &full},
		{OK: true, Envelope: &bare},
		{OK: true, Envelope: &EnvelopeJSON{IAT: -1, EditOf: n(0)}},
	} {
		out = append(out, v)
		v.Turns = n(int64(len(out)) * 7)
		out = append(out, v)
	}
	return out
}

// TestDecodeVerdictReadsWhatMarshalWroteInOnePass: every verdict json.Marshal writes is read by
// the one-pass reader (not handed on), and read back whole.
func TestDecodeVerdictReadsWhatMarshalWroteInOnePass(t *testing.T) {
	readsMarshalInOnePass(t, verdicts(), decodeVerdict, sameVerdictAsEncodingJSON)
}

// verdictInputs are verdicts off the form json.Marshal writes, each in one way.
var verdictInputs = []string{
	`{}`, `null`, `[]`, `true`, `{"ok":true}`, `{"ok":false}`, `{"ok":tru}`, `{"ok":truex}`, `{"ok":fals}`, `{"ok":null}`,
	`{"ok":1}`, `{"ok":"true"}`, `{"OK":true}`, `{"ok":true,"ok":false}`, `{"ok" :true}`, `{"ok":true }`, ` {"ok":true}`,
	`{"reason":"r"}`, `{"reason":"r","ok":false}`, `{"ok":false,"reason":1}`, `{"ok":false,"reason":null}`,
	`{"turns":1}`, `{"ok":true,"turns":1.5}`, `{"ok":true,"turns":null}`, `{"ok":true,"turns":01}`, `{"ok":true,"turns":-0}`,
	`{"ok":true,"envelope":null}`, `{"ok":true,"envelope":{}}`, `{"ok":true,"envelope":[]}`, `{"ok":true,"envelope":{"x":1}}`,
	`{"ok":true,"envelope":{"kind":"message","conversationId":"c"}}`, `{"ok":true,"envelope":{"Kind":"message"}}`,
	`{"ok":true,"envelope":{"iat":1.5}}`, `{"ok":true,"envelope":{"iat":"1"}}`, `{"ok":true,"envelope":{"editOf":null}}`,
	`{"ok":true,"envelope":{"editOf":2}}`, `{"ok":true,"envelope":{"asker":null}}`, `{"ok":true,"envelope":{"asker":{}}}`,
	`{"ok":true,"envelope":{"asker":{"actor":"a","tenant":"t"}}}`, `{"ok":true,"envelope":{"text":"\uD83C"}}`,
	`{"ok":true,"envelope":{"text":"` + "\xff" + `"}}`, `{"ok":true,"envelope":{"sig":"s","sig":"t"}}`,
	`{"ok":true,"envelope":{"text":"a\"b\\c\/d\b\f\n\r\t\u00e9"}}`, `{"ok":false,"reason":"\u"}`, `{"ok":false,"reason":"\u1"}`, `{"ok":true,"other":1}`, `{"ok":true,}`, `{"ok":true}}`,
	// A verdict cut short where a reader that gave up would leave a closing brace to the caller.
	`{"ok":true,"envelope":{"x":}}`, `{"ok":true,"envelope":{"kind":}}`, `{"ok":true,"envelope":{"asker":{"actor"}}}`,
	`{"ok":true,"envelope":{"kind":"m","x":}}`, `{"ok":}`, `{"ok":true,"x":}`,
}

// TestDecodeVerdictAsEncodingJSON: on every input DecodeVerdict gives what json.Unmarshal into an
// empty Verdict gives: verdictInputs, and each verdict json.Marshal writes cut short at every
// byte and with each byte left out.
func TestDecodeVerdictAsEncodingJSON(t *testing.T) {
	for _, in := range verdictInputs {
		sameVerdictAsEncodingJSON(t, []byte(in))
	}
	for _, v := range verdicts() {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		for i := range b {
			sameVerdictAsEncodingJSON(t, b[:i:i])
			sameVerdictAsEncodingJSON(t, append(append([]byte(nil), b[:i]...), b[i+1:]...))
		}
	}
}

// TestScanBool reads true and false and refuses anything else without moving (and false).
func TestScanBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "false": false, "true,": true, "false}": false} {
		p := scan{b: []byte(in)}
		v, ok := p.bool()
		require.True(t, ok, in)
		require.Equal(t, want, v, in)
		require.Equal(t, len(strings.TrimRight(in, ",}")), p.i, in)
	}
	for _, in := range []string{"", "t", "tru", "fals", "null", "1", "True", `"true"`} {
		p := scan{b: []byte(in)}
		v, ok := p.bool()
		require.False(t, ok, in)
		require.False(t, v, in)
		require.Zero(t, p.i, in)
	}
}

func FuzzDecodeVerdict(f *testing.F) {
	for _, v := range verdicts() {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	for _, in := range verdictInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameVerdictAsEncodingJSON(t, b) })
}
