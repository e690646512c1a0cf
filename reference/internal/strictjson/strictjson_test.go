package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/strictjson"
)

type identity struct {
	Tenant string `json:"tenant,omitempty"`
	Actor  string `json:"actor"`
}

type body struct {
	Text      *string          `json:"text"`
	MessageID *string          `json:"messageId,omitempty"`
	Who       []identity       `json:"who,omitempty"`
	Inner     *struct{ N int } `json:"inner,omitempty"`
	Payload   json.RawMessage  `json:"payload,omitempty"`
}

// TestDecodeNamesTheMember: every lenient form encoding/json takes is refused, naming the member
// at fault by its dotted path ("" for the body as a whole); what the contract allows is taken.
func TestDecodeNamesTheMember(t *testing.T) {
	for raw, want := range map[string]string{
		`null`:                    "",
		`{"text":"a"} }`:          "",
		`{"text":"a"}]`:           "",
		`{"text":"a"} {}`:         "",
		`{"text":"a"} x`:          "",
		` `:                       "",
		`{"text": `:               "text",
		`[1]`:                     "",
		`{"Text":"a"}`:            "Text",
		`{"text":"a","text":"b"}`: "text",
		`{"text":null}`:           "text",
		`{"messageId":"m"}`:       "text",
		`{"text":1}`:              "text",
		`{"text":"a","who":[{"actor":"x","Tenant":"t"}]}`: "who.Tenant",
		`{"text":"a","who":[{"tenant":"t"}]}`:             "who.actor",
		`{"text":"a","who":[null]}`:                       "who",
		`{"text":"a","inner":{"N":"x"}}`:                  "inner.N",
		`{"text":"a","payload":{"k":1,"k":2}}`:            "payload.k",
		`{"text":"a","payload":{"k":"\ud800"}}`:           "payload.k",
		"{\"text\":\"a\xff\"}":                            "text",
		"{\"text\":\"a\"}\xff":                            "",
		`{"text":"a\udc00"}`:                              "text",
		`{"text":"a\ud800\u0041"}`:                        "text",
		`{"text":"a\ud800"}`:                              "text",
		"\ufeff{\"text\":\"a\"}":                          "",
		`{"text":"a"` + strings.Repeat(`,"payload":[`, 1) + strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth) + `]}`: "payload",
	} {
		var b body
		err := strictjson.Decode([]byte(raw), &b)
		var se *strictjson.Error
		if !errors.As(err, &se) || !errors.Is(err, strictjson.ErrInvalid) {
			t.Errorf("Decode(%q) = %v, want a refusal", raw, err)
			continue
		}
		if se.Field != want {
			t.Errorf("Decode(%q) names %q, want %q", raw, se.Field, want)
		}
	}
	for _, raw := range []string{
		`{"text":"a"}`, " {\"text\":\"h\\u00e9 \\ud83d\\ude00\"}\n", `{"text":"","messageId":"m"}`,
		`{"text":"a","payload":{"A":1,"a":2,"x":null}}`, `{"text":"a","who":[{"actor":"x"}]}`,
		"{\"text\":\"h\xc3\xa9\"}", `{"text":"a","payload":[1,-0.5e+3,true,false,null,"s"]}`,
	} {
		var b body
		if err := strictjson.Decode([]byte(raw), &b); err != nil {
			t.Errorf("Decode(%q) = %v, want it taken", raw, err)
		}
	}
}

// TestString: a string read alone follows the rules Check applies to strings inside a body.
func TestString(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		next int
		ok   bool
	}{
		{`"a\u00e9" tail`, "aé", 9, true},
		{`"\ud83d\ude00"`, "😀", 14, true},
		{`"\ud83d"`, "", 0, false},
		{`"\ude00"`, "", 0, false},
		{"\"a\x01\"", "", 0, false},
		{`"\x"`, "", 0, false},
		{"\"\xff\"", "", 0, false},
		{`"open`, "", 0, false},
		{`open"`, "", 0, false},
	} {
		got, next, ok := strictjson.String([]byte(c.in), 0)
		if ok != c.ok || got != c.want || (ok && next != c.next) {
			t.Errorf("String(%q) = %q, %d, %v; want %q, %d, %v", c.in, got, next, ok, c.want, c.next, c.ok)
		}
		if ok && strictjson.Check([]byte(c.in[:next])) != nil {
			t.Errorf("String(%q) read %q, which Check refuses as a body", c.in, c.in[:next])
		}
	}
}
