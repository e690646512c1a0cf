package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestFieldOfNamesTheMember: a body refused for a member's type or an unknown member names
// that member in the error's detail; anything else names the body.
func TestFieldOfNamesTheMember(t *testing.T) {
	decode := func(body string) error {
		var v struct {
			Text  string `json:"text"`
			Inner struct {
				N int `json:"n"`
			} `json:"inner"`
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		return dec.Decode(&v)
	}
	for body, want := range map[string]string{
		`{"text": 1}`:           "text",
		`{"inner": {"n": "x"}}`: "inner.n",
		`{"nope": 1}`:           "nope",
		`{"text": `:             "body",
		`[1]`:                   "body",
	} {
		err := decode(body)
		if err == nil {
			t.Fatalf("%s: decoded", body)
		}
		if got := fieldOf(err); got != want {
			t.Errorf("fieldOf(%s) = %q, want %q", body, got, want)
		}
	}
}
