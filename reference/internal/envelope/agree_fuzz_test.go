package envelope

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/strictjson"
)

// wireEnvelope is the envelope's wire form as the gateway's decoder (strictjson.Decode) reads a
// body: pointers say which members are present; a member without omitempty is required.
type wireEnvelope struct {
	ConversationID *string      `json:"conversationId"`
	Kind           *string      `json:"kind"`
	ID             *string      `json:"id"`
	IAT            *json.Number `json:"iat"`
	Text           *string      `json:"text,omitempty"`
	Asker          *struct {
		Tenant     *string `json:"tenant,omitempty"`
		Actor      *string `json:"actor"`
		OnBehalfOf *string `json:"onBehalfOf,omitempty"`
	} `json:"asker"`
	EditOf *json.Number `json:"editOf,omitempty"`
	Sig    *string      `json:"sig"`
}

// wireNumbers is the same body with its integers as integers, so a string is refused there.
type wireNumbers struct {
	IAT    *int64 `json:"iat"`
	EditOf *int64 `json:"editOf,omitempty"`
}

// integerLexeme is how spec/envelopes.md writes iat and editOf: no sign, fraction or exponent.
var integerLexeme = regexp.MustCompile(`^(0|[1-9][0-9]{0,15})$`)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// viaDecoder reads raw the way the gateway reads a body, then applies what the envelope format
// adds on top (integers written plainly within MaxSafeInteger, text required but on a close
// envelope, and Validate). ok reports whether the result is an envelope.
func viaDecoder(raw []byte) (Envelope, bool) {
	var w wireEnvelope
	if strictjson.Decode(raw, &w) != nil {
		return Envelope{}, false
	}
	var n wireNumbers
	if json.Unmarshal(raw, &n) != nil || n.IAT == nil {
		return Envelope{}, false
	}
	e := Envelope{ConversationID: str(w.ConversationID), Kind: str(w.Kind), ID: str(w.ID), Text: str(w.Text), Sig: str(w.Sig),
		Asker: Identity{Tenant: str(w.Asker.Tenant), Actor: str(w.Asker.Actor), OnBehalfOf: str(w.Asker.OnBehalfOf)}}
	if !integerLexeme.MatchString(w.IAT.String()) || *n.IAT > MaxSafeInteger {
		return Envelope{}, false
	}
	e.IAT = *n.IAT
	if w.EditOf != nil {
		if n.EditOf == nil || !integerLexeme.MatchString(w.EditOf.String()) || *n.EditOf > MaxSafeInteger {
			return Envelope{}, false
		}
		e.EditOf = n.EditOf
	}
	if w.Text == nil && e.Kind != KindClose {
		return Envelope{}, false
	}
	if Validate(e) != nil {
		return Envelope{}, false
	}
	return e, true
}

// FuzzParseAgreesWithBodyDecoder: the envelope parser and the decoder of every request body
// (strictjson.Decode) agree on every input: Parse accepts exactly what the body decoder accepts
// and the envelope format allows, and both read the same envelope from it. Whatever the body
// decoder refuses as JSON (a member twice, in another case, null, trailing data, invalid UTF-8,
// an unpaired surrogate) Parse refuses too, and the other way round.
//
// Seeds: the vectors of fixtures/envelopes/vectors.json and each lenient form found in bodies.
func FuzzParseAgreesWithBodyDecoder(f *testing.F) {
	v := fuzzVectors(f)
	for _, s := range v.Signing {
		f.Add([]byte(s.Envelope))
	}
	for _, c := range v.Check.Vectors {
		if c.Raw != nil {
			f.Add([]byte(*c.Raw))
		} else if b, err := base64.StdEncoding.DecodeString(c.RawBase64); err == nil {
			f.Add(b)
		}
	}
	const head = `{"conversationId":"c1","kind":"user","id":"m1","iat":5,"asker":{"actor":"a"},"sig":"s"`
	for _, s := range []string{
		head + `,"text":"hi"}`,
		head + `,"text":"hi"} }`,
		head + `,"text":"hi"}]`,
		head + `,"text":"hi"}{}`,
		head + `,"Text":"hi"}`,
		head + `,"text":"hi","text":"ho"}`,
		head + `,"text":null}`,
		head + `,"text":"h` + "\xff" + `"}`,
		head + `,"text":"h\ud800"}`,
		head + `,"text":"h\udc00"}`,
		head + `,"text":"h\ud83d\ude00"}`,
		head + `,"text":"hi","editOf":1}`,
		head + `,"text":"hi","editOf":1.0}`,
		head + `,"text":"hi","editOf":"1"}`,
		head + `,"text":"hi","editOf":null}`,
		`{"conversationId":"c1","kind":"close","id":"m1","iat":5,"asker":{"actor":"a"},"sig":"s"}`,
		`{"conversationId":"c1","kind":"user","id":"m1","iat":-0,"asker":{"actor":"a"},"sig":"s","text":"x"}`,
		`{"conversationId":"c1","kind":"user","id":"m1","iat":5,"asker":{"actor":"a","Actor":"b"},"sig":"s","text":"x"}`,
		`null`, `{}`, ``, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		pe, perr := Parse(raw)
		de, dok := viaDecoder(raw)
		if (perr == nil) != dok {
			t.Fatalf("%q: Parse says %v, the body decoder says ok=%v", raw, perr, dok)
		}
		if dok && !sameEnvelope(pe, de) {
			t.Fatalf("%q: Parse read %+v, the body decoder %+v", raw, pe, de)
		}
		// The shared JSON rules alone: what Parse accepts passes Check.
		if perr == nil && strictjson.Check(raw) != nil {
			t.Fatalf("%q: Parse accepted what strictjson.Check refuses", raw)
		}
	})
}

func sameEnvelope(a, b Envelope) bool {
	if (a.EditOf == nil) != (b.EditOf == nil) || a.EditOf != nil && *a.EditOf != *b.EditOf {
		return false
	}
	a.EditOf, b.EditOf = nil, nil
	return a == b
}
