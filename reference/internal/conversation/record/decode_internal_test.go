package record

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// sameAsEncodingJSON decodes b both ways and fails unless they agree: DecodeValue against
// json.Unmarshal into an empty Value (the value, and whether there is an error), and EntryOf
// against the decode it makes without the one-pass reader.
func sameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	var want Value
	errWant := json.Unmarshal(b, &want)
	got, errGot := DecodeValue(b)
	require.Equal(t, errWant == nil, errGot == nil, "error of %s: %v, want %v", b, errGot, errWant)
	require.True(t, reflect.DeepEqual(want, got), "%s:\n got %#v\nwant %#v", b, got, want)

	ev := kernel.LogEvent{Gen: 2, Seq: 5, Decision: &kernel.Decision{ID: "o1:user", Value: b}}
	gotE, gotRef, gotOK := EntryOf(ev)
	var wantE loomtype.Entry
	var wantRef *InboxRef
	var v struct {
		Rec *Stored `json:"rec"`
	}
	wantOK := len(b) > 0 && b[0] == '{' && mayHoldRec(b) && json.Unmarshal(b, &v) == nil && v.Rec != nil
	if wantOK {
		wantE = v.Rec.Entry()
		wantE.Cursor = loomtype.Cursor{Gen: 2, Seq: 5}.String()
		wantRef = v.Rec.In
	}
	require.Equal(t, wantOK, gotOK, "EntryOf of %s", b)
	require.Equal(t, wantRef, gotRef, "EntryOf's inbox reference of %s", b)
	require.True(t, reflect.DeepEqual(wantE, gotE), "EntryOf of %s:\n got %#v\nwant %#v", b, gotE, wantE)
}

// records are records as the dialogue writes them: every optional field left out and each set,
// texts with what json.Marshal escapes (quotes, backslashes, controls, <>&, the line separators)
// and what it writes as it is (other non-ASCII).
func records() []Stored {
	text := func(s string) *string { return &s }
	at := time.Date(2026, 12, 4, 0, 17, 33, 224_000_000, time.UTC)
	return []Stored{
		{},
		{Ord: 1, Turn: 1, Role: loomtype.RoleUser, Status: loomtype.StatusAccepted, Text: text("hello"), Time: at},
		{Ord: 9, Turn: 7, Role: loomtype.RoleAssistant, Status: loomtype.StatusComplete, Text: text(`You said: "hi" \ <b>&amp;</b>` + "\n\t\r\b\f\x00\x1f\u2028\u2029 é 日本 🎉 \ufffd"),
			Asker: &loomtype.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}, Time: at, Classes: []string{"a", "memory:x", `q"<`}},
		{Cursor: "c", Ord: -3, Turn: 1 << 62, Role: loomtype.RoleUser, Status: loomtype.StatusRejected, Reason: loomtype.Reason("prompt-too-large"),
			ErrorID: "err_1", MessageID: "m-1", EditOf: 4, EditOfTurn: 2, Asker: &loomtype.Identity{Actor: "alice"},
			Time: at.Add(time.Hour), TurnExecutionID: "t/1"},
		{Role: loomtype.RoleSystem, Status: loomtype.StatusClosed, Text: text(""), Asker: &loomtype.Identity{}, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Ord: 3, Turn: 2, Role: loomtype.RoleUser, Status: loomtype.StatusAccepted, EditOfTurn: 1, Time: at, In: &InboxRef{Seq: 12, Sum: "0123456789abcdef"}},
		{Ord: 4, Turn: 2, Role: loomtype.RoleUser, Status: loomtype.StatusAccepted, Time: at, Classes: []string{"x"}, In: &InboxRef{Seq: 1, Sum: "", NoID: true}},
	}
}

// TestStoredKeysFollowStored: the one-pass reader knows every field of Stored, by the name and in
// the order json.Marshal writes it (a field added to Stored is read there too, or every record
// holding it would be handed to encoding/json).
func TestStoredKeysFollowStored(t *testing.T) {
	require.Equal(t, jsonNames(reflect.TypeFor[Stored]()), storedKeys)
	for _, k := range storedKeys {
		var p scan
		var s Stored
		p.b = []byte(`"x"`)
		if k == "ord" || k == "turn" || k == "editOf" || k == "editOfTurn" {
			p.b = []byte(`1`)
		}
		if k == "asker" {
			p.b = []byte(`{"actor":"x"}`)
		}
		if k == "classes" {
			p.b = []byte(`["x"]`)
		}
		if k == "time" {
			p.b = []byte(`"2026-12-04T00:00:00Z"`)
		}
		if k == "in" {
			p.b = []byte(`{"seq":1}`)
		}
		require.True(t, p.field(&s, k) && p.end(), "field %s is read", k)
		require.False(t, s.isEmpty(), "field %s is set", k)
	}
}

// isEmpty reports whether s holds nothing.
func (s Stored) isEmpty() bool { return reflect.ValueOf(s).IsZero() }

// values are records with and without a turn count, as the dialogue writes them.
func values() []Value {
	var out []Value
	for i, r := range records() {
		n := int64(i * 7)
		out = append(out, Value{Rec: r}, Value{Rec: r, Turns: &n})
	}
	return out
}

// TestDecodeValueReadsWhatMarshalWroteInOnePass: every value json.Marshal writes is read by the
// one-pass reader (not handed on), and read back whole.
func TestDecodeValueReadsWhatMarshalWroteInOnePass(t *testing.T) {
	readsMarshalInOnePass(t, values(), decodeValue, sameAsEncodingJSON)
}

// readsMarshalInOnePass fails unless onePass reads what json.Marshal writes of each of vs, and
// reads it back whole, and same holds of it.
func readsMarshalInOnePass[T any](t *testing.T, vs []T, onePass func([]byte) (T, bool), same func(*testing.T, []byte)) {
	t.Helper()
	for i, v := range vs {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		got, ok := onePass(b)
		require.True(t, ok, "value %d: %s is not read in one pass", i, b)
		require.True(t, reflect.DeepEqual(v, got), "value %d: %s:\n got %#v\nwant %#v", i, b, got, v)
		same(t, b)
	}
}

// recInputs are records near the form json.Marshal writes, each off it in one way: the one-pass
// reader must refuse each (and encoding/json then decides) or read it as encoding/json does.
var recInputs = []string{
	`{}`, `null`, `[]`, `1`, `"x"`, `{"ord":1}`, ` {"ord":1}`, `{"ord":1} `, `{"ord" :1}`, `{"ord":1,}`, `{,}`,
	`{"ord":null}`, `{"text":null}`, `{"asker":null}`, `{"classes":null}`, `{"time":null}`,
	`{"Ord":1}`, `{"ORD":1,"ord":2}`, `{"ord":1,"ord":2}`, `{"turn":1,"ord":2}`, `{"unknown":1}`, `{"ord":1,"unknown":true}`,
	`{"ord":1.0}`, `{"ord":1e2}`, `{"ord":-0}`, `{"ord":01}`, `{"ord":-}`, `{"ord":9223372036854775807}`, `{"ord":9223372036854775808}`,
	`{"ord":-9223372036854775808}`, `{"ord":"1"}`, `{"role":1}`, `{"text":1}`,
	`{"text":"a\"b\\c\/d\b\f\n\r\t"}`, `{"text":"\u003c\u003e\u0026\u2028\u2029\u0000\u00e9"}`, `{"text":"\uD83C\uDF89"}`,
	`{"text":"\uD83C"}`, `{"text":"\uDF89x"}`, `{"text":"\u12"}`, `{"text":"\u12G4"}`, `{"text":"\x"}`, `{"text":"a` + "\x01" + `"}`,
	`{"text":"` + "\xff" + `"}`, `{"text":"` + "\xe6\x97" + `"}`, `{"text":"\ufffd"}`, `{"text":"unterminated}`,
	`{"time":"2026-12-04T00:17:33.224Z"}`, `{"time":"2026-12-04T00:17:33+02:00"}`, `{"time":"2026-12-04"}`, `{"time":"\u0032026-12-04T00:17:33Z"}`,
	`{"time":1}`, `{"asker":{}}`, `{"asker":{"actor":"a","tenant":"t"}}`, `{"asker":{"tenant":"t","actor":"a","onBehalfOf":"o"}}`,
	`{"asker":{"Actor":"a"}}`, `{"asker":{"actor":1}}`, `{"asker":{"actor":"a","x":1}}`, `{"asker":{"actor":"a",}}`, `{"asker":[]}`,
	`{"classes":[]}`, `{"classes":["a","b"]}`, `{"classes":["a",]}`, `{"classes":[1]}`, `{"classes":["a"],"classes":["b"]}`,
	`{"cursor":"","ord":1,"turn":2,"role":"user","status":"accepted","text":"t","reason":"r","errorId":"e","messageId":"m","editOf":3,"editOfTurn":4,"asker":{"actor":"a"},"time":"2026-12-04T00:17:33Z","classes":["c"],"turnExecutionId":"x"}`,
	// Cut short or broken at each place the reader looks.
	`{`, `{"`, `{"ord"`, `{"ord"}`, `{"ord":}`, `{"ord":1,}`, `{"ord":1`, `{"ord":1}}`, `{"ord":1 }`, `{"ord":1"turn":2}`,
	`{"ord":1.}`, `{"ord":1.5}`, `{"ord":1e}`, `{"ord":1e5}`, `{"ord":1E5}`, `{"ord":--1}`, `{"ord":00}`, `{"ord":-01}`, `{"ord":0}`, `{"ord":-}`,
	`{"text":"\u"}`, `{"text":"\u1"}`, `{"text":"\u12"}`, `{"text":"\u123"}`,
	`{"text":"a`, `{"text":"a\`, `{"text":"\u00e`, `{"text":"\u00e9`, `{"text":"\"`, `{"text":"` + "\x80" + `"}`, `{"text":"` + "\xc3" + `"}`,
	`{"text":"` + "\xed\xa0\x80" + `"}`, `{"text":"a` + "\x7f" + `"}`,
	`{"asker":{`, `{"asker":{}`, `{"asker":{"actor"}}`, `{"asker":{"actor":}}`, `{"asker":{"actor":"a"}`, `{"asker":{"actor":"a",}}`,
	`{"asker":{"actor":"a""tenant":"t"}}`, `{"asker":{"tenant":"t","actor":"a","onBehalfOf":"o","x":"y"}}`, `{"asker":{"actor":"a","actor":"b"}}`,
	`{"classes":[}`, `{"classes":["a"}`, `{"classes":[]`, `{"classes":["a"]`, `{"classes":["a""b"]}`, `{"classes":[,]}`,
	`{"cursor":}`, `{"role":}`, `{"text":}`, `{"asker":}`, `{"time":}`, `{"classes":}`, `{"text":"\"}`, `{"text":"\\"}`,
}

// onePass are records the one-pass reader reads itself (each is json.Marshal's form or a part of it).
var onePass = []string{`{}`, `{"ord":0}`, `{"ord":-1}`, `{"asker":{}}`, `{"asker":{"actor":"a"}}`, `{"classes":[]}`, `{"classes":["a"]}`,
	`{"text":"é \u00e9 \" \\ \/ \b\f\n\r\t"}`, `{"cursor":"c","turnExecutionId":"x"}`}

// TestDecodeValueReadsOnePass: the one-pass reader reads each of onePass, alone and with a turn
// count, as encoding/json does.
func TestDecodeValueReadsOnePass(t *testing.T) {
	for _, in := range onePass {
		for _, b := range []string{`{"rec":` + in + `}`, `{"rec":` + in + `,"turns":2}`} {
			v, ok := decodeValue([]byte(b))
			require.True(t, ok, "%s is not read in one pass", b)
			var want Value
			require.NoError(t, json.Unmarshal([]byte(b), &want))
			require.True(t, reflect.DeepEqual(want, v), "%s:\n got %#v\nwant %#v", b, v, want)
		}
	}
}

// valueInputs are the shapes around a record: each record input alone, as the record of a value
// with and without a turn count, and values off the form json.Marshal writes.
func valueInputs() []string {
	out := []string{`{}`, `null`, `[]`, `{"turns":1}`, `{"rec":null}`, `{"rec":null,"turns":1}`, `{"turns":1,"rec":{}}`,
		`{"rec":{},"turns":1}`, `{"rec":{},"turns":null}`, `{"rec":{},"turns":"1"}`, `{"rec":{},"turns":1.5}`, `{"rec":{},"turns":-1}`,
		`{"rec":{},"other":1}`, `{"rec":{},"turns":1,"other":1}`, `{"Rec":{}}`, `{"rec":{},"rec":{"ord":2}}`, `{"rec":{}} `, `{"rec" :{}}`,
		`{"rec":{},"turns":1`, `{"rec":{"ord":1}`, `{"rec":[]}`, `{"rec":{"ord":1},"turns":99999999999999999999}`,
		`{"rec":}`, `{"rec":,"turns":1}`, `{"rec":{},"turns":}`, `{"rec":{},"turns"}`, `{"rec":{},}`, `{"rec":{}`, `{"rec"`, `{"rec":{},"turns":01}`,
		`{"rec":{},"turns":1}}`, `{"rec":{}"turns":1}`, `{"rec":{},"turns":1,}`,
		// A record cut short where a reader that gave up would leave a closing brace to the caller.
		`{"rec":{"x":}`, `{"rec":{"ord":1,"x":}`, `{"rec":{"asker":{"actor"}}`, `{"rec":{"asker":{"x":}}`, `{"rec":{"asker":{"actor":}}`,
		`{"rec":{"asker":{"actor":"a","x":}}`, `{"rec":{"classes":["a",}}`}
	for _, in := range recInputs {
		out = append(out, in, `{"rec":`+in+`}`, `{"rec":`+in+`,"turns":3}`)
	}
	return out
}

// TestDecodeValueAsEncodingJSON: on every input DecodeValue gives what json.Unmarshal into an
// empty Value gives, with an error exactly where it has one, and EntryOf what it gives without
// the one-pass reader.
func TestDecodeValueAsEncodingJSON(t *testing.T) {
	for _, in := range valueInputs() {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) { sameAsEncodingJSON(t, []byte(in)) })
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, v := range values() {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	for _, in := range valueInputs() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsEncodingJSON(t, b) })
}
