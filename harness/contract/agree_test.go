package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/schemas"
	"github.com/loomcheck/loomcheck/spec"
)

// TestComponentsAgreeWithSchemas checks that the schemas of the OpenAPI document and the JSON
// Schemas of package schemas, which describe the same objects twice, agree: on good documents and
// on many mutations of them, both find problems at the same places. Under the race detector it
// judges a share of the mutations of each document (share, asbefore_test.go).
func TestComponentsAgreeWithSchemas(t *testing.T) {
	if testing.Short() {
		t.Skip("many mutations")
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	rejected := `{"cursor":"0.3","ord":2,"turn":0,"role":"user","status":"rejected","reason":"stale","time":"2026-11-29T10:00:00Z"}`
	failed := `{"cursor":"0.4","ord":3,"turn":1,"role":"assistant","status":"failed","reason":"denied","errorId":"e1","time":"2026-11-29T10:00:00Z","asker":{"actor":"a"}}`
	closed := `{"cursor":"1.0","ord":9,"turn":4,"role":"system","status":"closed","time":"2026-11-29T10:00:00Z"}`
	closedNoOrd := `{"cursor":"1.0","turn":4,"role":"system","status":"closed","time":"2026-11-29T10:00:00Z"}`
	envelope := `{"conversationId":"c1","kind":"user","id":"m1","iat":1764410400000,"text":"hi","asker":{"actor":"a"},"editOf":1,"sig":"xL5a2ioWAoOaPMCZYzTyk8Qmsy5HAg905MYwstw13e0"}`
	pairs := []struct {
		component, schema string
		good              []string
	}{
		{"Cursor", "cursor", []string{`"0.7"`}},
		// The error responses narrow the code per status; the bare object agrees.
		{"Error", "error", []string{`{"error":"bad request","detail":"d","errorId":"e"}`}},
		{"Identity", "identity", []string{identity}},
		{"Status", "status", []string{status}},
		{"Entry", "entry", []string{accepted, reply, hidden, rejected, failed, closed, closedNoOrd}},
		{"Page", "history-page", []string{`{"entries":[` + accepted + `,` + hidden + `],"nextCursor":"0.9","done":false}`}},
		{"Discovery", "discovery", []string{`{"specVersion":"0.1.0","profiles":["core"],"implementation":{"name":"x","version":"1"},"runtimeDoor":false}`, `{"specVersion":"0.1.0","profiles":[],"implementation":{"name":"x","version":"1"},"extensions":["chosen-id"]}`}},
		{"TurnRequest", "turn-request", []string{`{"text":"hi","messageId":"m1","editOf":1}`}},
		{"TurnAccepted", "turn-accepted", []string{`{"messageId":"m1","delivered":true}`}},
		{"StartRequest", "start-request", []string{`{"id":"c1","mode":"shared","participants":[{"tenant":"t","actor":"a","onBehalfOf":"b"}]}`}},
		{"CloseRequest", "close-request", []string{`{}`}},
		{"Participants", "participants", []string{`{"owner":{"actor":"a"},"participants":[{"actor":"b","tenant":"t"}]}`}},
		{"ParticipantsChange", "participants-change", []string{`{"op":"add","identity":{"actor":"b","tenant":"t"}}`}},
		{"RuntimeSend", "runtime-send", []string{`{"messageId":"m1","payload":` + envelope + `}`}},
		{"RuntimeAccepted", "runtime-accepted", []string{`{"delivered":true}`}},
		{"RuntimeLog", "runtime-log", []string{`{"events":[{"cursor":"0.1","kind":"k","data":1}],"nextCursor":"0.1","done":true}`}},
		{"Envelope", "envelope", []string{envelope, `{"conversationId":"c1","kind":"close","id":"m2","iat":1,"text":"","asker":{"actor":"a"},"sig":"xL5a2ioWAoOaPMCZYzTyk8Qmsy5HAg905MYwstw13e0"}`}},
		{"SseStatus", "sse-status", []string{status}},
		{"SsePartial", "sse-partial", []string{`{"turn":1,"text":""}`}},
		{"SseMessage", "sse-message", []string{accepted, hidden}},
		{"SseDelta", "sse-delta", []string{`{"turn":1,"text":"x"}`}},
		{"SseReset", "sse-reset", []string{`{"turn":1}`}},
		{"SseClosed", "sse-closed", []string{`{}`}},
		{"SseReconnect", "sse-reconnect", []string{`{"reason":"shutdown"}`}},
		{"SseError", "sse-error", []string{`{"error":"internal","errorId":"e"}`}},
	}
	salt := 0
	for _, p := range pairs {
		ref := doc.Components.Schemas[p.component]
		require.NotNil(t, ref, p.component)
		for _, good := range p.good {
			salt++
			for _, variant := range share(mutations(t, good), salt) {
				kin := kinPointers(ref.Value, variant)
				own := ownPointers(t, p.schema, variant)
				assert.ElementsMatch(t, own, kin, "%s vs %s on %s", p.component, p.schema, variant)
			}
			assert.Empty(t, ownPointers(t, p.schema, good), "%s: %s", p.schema, good)
		}
	}
}

func kinPointers(sch *openapi3.Schema, doc string) []string {
	var value any
	if err := json.Unmarshal([]byte(doc), &value); err != nil {
		panic(err)
	}
	err := sch.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
	if err == nil {
		return []string{}
	}
	return distinct(schemaViolations("", err))
}

func ownPointers(t *testing.T, name, doc string) []string {
	err := schemas.Validate(name, []byte(doc))
	if err == nil {
		return []string{}
	}
	var verr *schemas.ValidationError
	require.True(t, errors.As(err, &verr), "%s: %v", name, err)
	var viols []Violation
	for _, p := range verr.Problems {
		viols = append(viols, Violation{Pointer: p.Pointer})
	}
	return distinct(viols)
}

func distinct(viols []Violation) []string {
	out := []string{}
	for _, v := range viols {
		if !slices.Contains(out, v.Pointer) {
			out = append(out, v.Pointer)
		}
	}
	return out
}

// mutations returns doc and variants of it: each property removed, each value (down to two
// levels) replaced by values of other types and edge values, and an unknown property added to
// each object.
func mutations(t *testing.T, doc string) []string {
	var root any
	require.NoError(t, json.Unmarshal([]byte(doc), &root))
	out := []string{doc}
	emit := func(v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	replacements := []any{"x", "", 0.0, -1.0, 1.5, 1e19, true, nil, map[string]any{}, []any{}, "0.1"}
	var walk func(path []any, depth int)
	walk = func(path []any, depth int) {
		node := get(root, path)
		switch n := node.(type) {
		case map[string]any:
			emit(set(root, path, with(n, "zz-unknown", 1.0)))
			for k := range n {
				emit(set(root, path, without(n, k)))
				for _, r := range replacements {
					emit(set(root, append(slices.Clone(path), k), r))
				}
				if depth < 2 {
					walk(append(slices.Clone(path), k), depth+1)
				}
			}
		case []any:
			for i := range n {
				for _, r := range replacements {
					emit(set(root, append(slices.Clone(path), i), r))
				}
				if depth < 2 {
					walk(append(slices.Clone(path), i), depth+1)
				}
			}
		}
	}
	walk(nil, 0)
	for _, r := range replacements {
		emit(r)
	}
	return out
}

func get(v any, path []any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// set returns a deep copy of root with the value at path replaced.
func set(root any, path []any, value any) any {
	if len(path) == 0 {
		return value
	}
	switch n := root.(type) {
	case map[string]any:
		c := make(map[string]any, len(n))
		for k, v := range n {
			c[k] = v
		}
		k := path[0].(string)
		c[k] = set(n[k], path[1:], value)
		return c
	case []any:
		c := slices.Clone(n)
		i := path[0].(int)
		c[i] = set(n[i], path[1:], value)
		return c
	}
	panic(fmt.Sprintf("no container at %v", strings.Repeat("?", len(path))))
}

func with(m map[string]any, k string, v any) map[string]any {
	c := make(map[string]any, len(m)+1)
	for key, val := range m {
		c[key] = val
	}
	c[k] = v
	return c
}

func without(m map[string]any, k string) map[string]any {
	c := make(map[string]any, len(m))
	for key, val := range m {
		if key != k {
			c[key] = val
		}
	}
	return c
}
