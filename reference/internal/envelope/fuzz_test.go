package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fuzzKey signs the envelopes the fuzz targets build.
var fuzzKey = bytes.Repeat([]byte{0x5c}, 32)

// fuzzVectors reads fixtures/envelopes/vectors.json for seeds.
func fuzzVectors(f *testing.F) vectorFile {
	f.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "envelopes", "vectors.json"))
	if err != nil {
		f.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	return v
}

// FuzzParse feeds arbitrary payloads to Parse and Check. Invariants:
//   - neither panics;
//   - a refusal is a *MalformedError (matching ErrMalformed) whose Offset lies inside the payload,
//     and Check calls it ReasonMalformed;
//   - what parses is valid, survives a JSON round trip unchanged, and has a canonical form that is
//     the domain, a 0x00 and one JSON object holding exactly the signed fields;
//   - signed again, the envelope verifies; with any one byte of its wire form changed, it verifies
//     only when the change left both the canonical form and the signature as they were.
//
// Seeds: the signing and check vectors of fixtures/envelopes/vectors.json, plus testdata/fuzz.
func FuzzParse(f *testing.F) {
	v := fuzzVectors(f)
	for _, s := range v.Signing {
		f.Add([]byte(s.Envelope), uint16(0), byte(1))
	}
	for i, c := range v.Check.Vectors {
		raw := []byte(nil)
		if c.Raw != nil {
			raw = []byte(*c.Raw)
		} else if b, err := base64.StdEncoding.DecodeString(c.RawBase64); err == nil {
			raw = b
		}
		f.Add(raw, uint16(i*7), byte(0x20))
	}
	f.Add([]byte(`{"conversationId":"c","kind":"user","id":"i","iat":1,"text":"\u2028\ud83d\ude00","asker":{"actor":"a"},"sig":"s"}`), uint16(40), byte(2))
	f.Add([]byte(`{"conversationId":"c","kind":"close","id":"i","iat":0,"text":"","asker":{"actor":"a","tenant":""},"editOf":1,"sig":""}`), uint16(3), byte(4))
	f.Add([]byte(`[]`), uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, raw []byte, pos uint16, flip byte) {
		e, err := Parse(raw)
		verdict := Check(CheckInput{Raw: raw, Keys: [][]byte{fuzzKey}, ConversationID: e.ConversationID,
			Voices: func(Identity) bool { return true }, Now: e.IAT})
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse refused with %T %v, want a *MalformedError", err, err)
			}
			if me.Offset < 0 || me.Offset > len(raw) {
				t.Fatalf("offset %d outside a payload of %d bytes", me.Offset, len(raw))
			}
			if !reflect.DeepEqual(e, Envelope{}) {
				t.Fatalf("a refused payload returned fields: %+v", e)
			}
			if verdict.OK || verdict.Reason != ReasonMalformed || verdict.Authentic {
				t.Fatalf("Check of a malformed payload: %+v", verdict)
			}
			return
		}
		if err := Validate(e); err != nil {
			t.Fatalf("Parse accepted an envelope Validate refuses: %v", err)
		}
		if e.Sig == "" && verdict.Reason != ReasonUnauthenticated {
			t.Fatalf("an empty sig is a signature that never verifies, got %+v", verdict)
		}
		if verdict.Reason == ReasonMalformed {
			t.Fatalf("Check calls malformed what Parse accepts: %+v", verdict)
		}
		// The JSON round trip keeps every field.
		wire, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(wire)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", wire, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip changed the envelope:\n%+v\n%+v", e, back)
		}
		checkCanonical(t, e)

		// Signed, it verifies; tampered, it does not, unless nothing signed changed.
		signed := Sign(fuzzKey, e)
		if err := Verify([][]byte{fuzzKey}, signed); err != nil {
			t.Fatalf("a signed valid envelope does not verify: %v", err)
		}
		good, err := json.Marshal(signed)
		if err != nil {
			t.Fatal(err)
		}
		if flip == 0 {
			flip = 1
		}
		bad := bytes.Clone(good)
		bad[int(pos)%len(bad)] ^= flip
		te, err := Parse(bad)
		if err != nil {
			return
		}
		same := bytes.Equal(Canonical(te), Canonical(signed)) && te.Sig == signed.Sig
		if verr := Verify([][]byte{fuzzKey}, te); verr == nil && !same {
			t.Fatalf("a tampered envelope verifies:\n%s\n%s", good, bad)
		} else if verr != nil && same {
			t.Fatalf("an envelope whose signed bytes did not change no longer verifies:\n%s\n%s", good, bad)
		}
	})
}

// checkCanonical decodes the canonical form of a valid envelope with encoding/json and compares
// every member with the envelope's fields.
func checkCanonical(t *testing.T, e Envelope) {
	t.Helper()
	c := Canonical(e)
	if !bytes.Equal(c, Canonical(e)) {
		t.Fatal("Canonical is not deterministic")
	}
	body, ok := bytes.CutPrefix(c, []byte(Domain+"\x00"))
	if !ok {
		t.Fatalf("canonical form without its domain: %q", c)
	}
	if !json.Valid(body) {
		t.Fatalf("canonical body is not JSON: %q", body)
	}
	var got struct {
		Asker          map[string]string `json:"asker"`
		ConversationID string            `json:"conversationId"`
		EditOf         *int64            `json:"editOf"`
		IAT            int64             `json:"iat"`
		ID             string            `json:"id"`
		Kind           string            `json:"kind"`
		Text           string            `json:"text"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("canonical body %q: %v", body, err)
	}
	asker := map[string]string{"actor": e.Asker.Actor}
	if e.Asker.Tenant != "" {
		asker["tenant"] = e.Asker.Tenant
	}
	if e.Asker.OnBehalfOf != "" {
		asker["onBehalfOf"] = e.Asker.OnBehalfOf
	}
	if !reflect.DeepEqual(got.Asker, asker) || got.ConversationID != e.ConversationID ||
		!reflect.DeepEqual(got.EditOf, e.EditOf) || got.IAT != e.IAT || got.ID != e.ID ||
		got.Kind != e.Kind || got.Text != e.Text {
		t.Fatalf("canonical body %q does not hold the envelope %+v", body, e)
	}
	// No whitespace, members in byte order: re-encoding the decoded body with sorted keys
	// must give the same bytes.
	var generic map[string]any
	d2 := json.NewDecoder(bytes.NewReader(body))
	d2.UseNumber()
	if err := d2.Decode(&generic); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		t.Fatal(err)
	}
	if again := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(again, body) && !escapesDiffer(again, body) {
		t.Fatalf("canonical body is not in sorted compact form:\n%s\n%s", body, again)
	}
}

// escapesDiffer reports whether a and b decode to the same JSON value; encoding/json escapes
// U+2028, U+2029 and ill-formed bytes where RFC 8785 writes them raw, so only those may differ.
func escapesDiffer(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y) && bytes.Contains(a, []byte(`\u20`))
}

// FuzzParseReplaySet feeds arbitrary carries to ParseReplaySet. Invariants: no panic; a refusal
// is a *CarryError (matching ErrInvalidCarry) with an offset inside the input; an accepted set
// holds at most its capacity, only valid ids, and its carry form parses back to the same set.
//
// Seeds: the carries of fixtures/envelopes/vectors.json, plus testdata/fuzz.
func FuzzParseReplaySet(f *testing.F) {
	v := fuzzVectors(f)
	for _, c := range v.Carries {
		f.Add([]byte(c.Carry), uint8(c.Capacity))
	}
	f.Add([]byte(`{"floor":3,"seen":[["a",1],["b",2]]}`), uint8(2))
	f.Add([]byte(`{"floor":0,"seen":[]}`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, capacity uint8) {
		s, err := ParseReplaySet(data, int(capacity%16))
		if err != nil {
			var ce *CarryError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidCarry) || s != nil {
				t.Fatalf("refusal %T %v with set %v", err, err, s)
			}
			if ce.Offset < 0 || ce.Offset > len(data) {
				t.Fatalf("offset %d outside %d bytes", ce.Offset, len(data))
			}
			return
		}
		if s.Len() > s.Capacity() {
			t.Fatalf("%d ids held over a capacity of %d", s.Len(), s.Capacity())
		}
		for _, e := range s.queue {
			if !ValidID(e.id) || !s.Contains(e.id) {
				t.Fatalf("held id %q", e.id)
			}
		}
		if s.Floor() < 0 || s.Floor() > MaxSafeInteger {
			t.Fatalf("floor %d", s.Floor())
		}
		b, _ := s.MarshalJSON()
		again, err := ParseReplaySet(b, s.Capacity())
		if err != nil {
			t.Fatalf("carry %s does not parse back: %v", b, err)
		}
		b2, _ := again.MarshalJSON()
		if !bytes.Equal(b, b2) {
			t.Fatalf("carry round trip:\n%s\n%s", b, b2)
		}
	})
}
