package schemas

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// required lists the schemas the kit promises; Names may hold more (report).
var required = []string{
	"close-request", "cursor", "discovery", "entry", "envelope", "error", "history-page",
	"identity", "participants", "participants-change", "runtime-accepted", "runtime-log",
	"runtime-send", "sse-closed", "sse-delta", "sse-error", "sse-message", "sse-partial",
	"sse-reconnect", "sse-reset", "sse-status", "start-request", "status", "sut-config",
	"turn-accepted", "turn-request", "stream-frame", "stream-block",
}

func TestNamesAndIDs(t *testing.T) {
	names := Names()
	assert.True(t, slices.IsSorted(names))
	for _, name := range required {
		assert.Contains(t, names, name)
	}
	for _, name := range names {
		raw, err := Raw(name)
		require.NoError(t, err, name)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(raw, &doc), name)
		assert.Equal(t, URL(name), doc["$id"], name)
		if name != "report" {
			assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc["$schema"], name)
		}
	}
}

func TestEverySchemaCompiles(t *testing.T) {
	for _, name := range Names() {
		_, err := Compile(name)
		assert.NoError(t, err, name)
	}
}

func TestUnknownSchema(t *testing.T) {
	for _, name := range []string{"nope", "", "../schemas", "entry.schema.json"} {
		_, err := Raw(name)
		assert.ErrorIs(t, err, ErrUnknownSchema, name)
		_, err = Compile(name)
		assert.ErrorIs(t, err, ErrUnknownSchema, name)
		assert.ErrorIs(t, Validate(name, []byte(`{}`)), ErrUnknownSchema, name)
	}
}

func TestNotJSON(t *testing.T) {
	// `{}A` and `{} ]` were found by FuzzEvent (harness/contract): bytes after the value passed.
	for _, doc := range []string{``, `{`, `{} {}`, `nul`, `{}A`, `{} ]`, `{}\x00`} {
		err := Validate("status", []byte(doc))
		assert.ErrorIs(t, err, ErrNotJSON, doc)
		var verr *ValidationError
		assert.False(t, errors.As(err, &verr), doc)
	}
}

const (
	identity = `{"tenant":"acme","actor":"alice"}`
	status   = `{"id":"c1","mode":"owner","state":"open","turns":2,"generation":0,"owner":` + identity + `}`
	entry    = `{"cursor":"0.7","ord":3,"turn":2,"role":"user","status":"accepted","text":"hi","messageId":"m1","asker":` + identity + `,"time":"2026-11-29T10:00:00.000Z"}`
	sigKey   = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	sig      = "xL5a2ioWAoOaPMCZYzTyk8Qmsy5HAg905MYwstw13e0"
)

type schemaCase struct {
	name     string
	schema   string
	doc      string
	pointers []string // nil: valid
}

func schemaCases() []schemaCase {
	return []schemaCase{
		{"identity ok", "identity", identity, nil},
		{"identity extra field tolerated", "identity", `{"actor":"a","x":1}`, nil},
		{"identity no actor", "identity", `{"tenant":"t"}`, []string{"/actor"}},
		{"identity empty actor", "identity", `{"actor":""}`, []string{"/actor"}},

		{"error ok", "error", `{"error":"bad request","detail":"text"}`, nil},
		{"error unknown code", "error", `{"error":"oops"}`, []string{"/error"}},
		{"error internal without errorId", "error", `{"error":"internal"}`, []string{"/errorId"}},
		{"error not found exact", "error", `{"error":"not found"}`, nil},
		{"error not found with more", "error", `{"error":"not found","detail":"x"}`, []string{""}},

		{"status ok", "status", status, nil},
		{"status many problems", "status", `{"id":"c1","mode":"solo","state":"open","turns":"2","generation":-1}`,
			[]string{"/mode", "/turns", "/generation", "/owner"}},

		{"entry ok", "entry", entry, nil},
		{"entry extra field tolerated", "entry", strings.Replace(entry, `"ord":3`, `"ord":3,"x-vendor":true`, 1), nil},
		{"entry ord zero", "entry", strings.Replace(entry, `"ord":3`, `"ord":0`, 1), []string{"/ord"}},
		{"entry without ord", "entry", strings.Replace(entry, `"ord":3,`, ``, 1), []string{"/ord"}},
		{"entry close without ord", "entry", `{"cursor":"1.0","turn":4,"role":"system","status":"closed","time":"2026-11-29T10:00:00Z"}`, nil},
		{"entry bad cursor", "entry", strings.Replace(entry, `"0.7"`, `"7"`, 1), []string{"/cursor"}},
		{"entry cursor too long", "entry", strings.Replace(entry, `"0.7"`, `"0.1234567890123456789"`, 1), []string{"/cursor"}},
		{"entry bad time", "entry", strings.Replace(entry, `2026-11-29T10:00:00.000Z`, `yesterday`, 1), []string{"/time"}},
		{"entry missing text when accepted", "entry", strings.Replace(entry, `"text":"hi",`, ``, 1), []string{"/text"}},
		{"entry user cannot complete", "entry", strings.Replace(entry, `"accepted"`, `"complete"`, 1), []string{"/status"}},
		{"entry restricted ok", "entry",
			`{"cursor":"0.7","ord":3,"turn":2,"role":"assistant","status":"restricted","time":"2026-11-29T10:00:00Z","asker":` + identity + `}`, nil},
		{"entry restricted leaks", "entry",
			`{"cursor":"0.7","ord":3,"turn":2,"role":"assistant","status":"restricted","time":"2026-11-29T10:00:00Z","text":"secret","classes":["pii"],"turnExecutionId":"x"}`,
			[]string{"/text", "/classes", "/turnExecutionId"}},
		{"entry rejected ok", "entry",
			`{"cursor":"0.8","ord":4,"turn":0,"role":"user","status":"rejected","reason":"stale","time":"2026-11-29T10:00:00Z"}`, nil},
		{"entry rejected wrong", "entry",
			`{"cursor":"0.8","ord":4,"turn":3,"role":"user","status":"rejected","reason":"because","text":"t","time":"2026-11-29T10:00:00Z"}`,
			[]string{"/turn", "/text", "/reason"}},
		{"entry failed without errorId", "entry",
			`{"cursor":"0.9","ord":5,"turn":2,"role":"assistant","status":"failed","reason":"model-error","time":"2026-11-29T10:00:00Z"}`,
			[]string{"/errorId"}},
		{"entry closed", "entry",
			`{"cursor":"0.9","ord":5,"turn":2,"role":"system","status":"closed","time":"2026-11-29T10:00:00Z"}`, nil},

		{"page ok", "history-page", `{"entries":[` + entry + `],"nextCursor":"0.7","done":false}`, nil},
		{"page nested problems", "history-page", `{"entries":[` + strings.Replace(entry, `"ord":3`, `"ord":"3"`, 1) + `],"done":"no"}`,
			[]string{"/entries/0/ord", "/done", "/nextCursor"}},

		{"discovery ok", "discovery", `{"specVersion":"0.1.0","profiles":["core","durability"],"implementation":{"name":"x","version":"1"},"runtimeDoor":true}`, nil},
		{"discovery bad", "discovery", `{"specVersion":1,"profiles":"core","implementation":{"name":"x"}}`,
			[]string{"/specVersion", "/profiles", "/implementation/version"}},

		{"turn request ok", "turn-request", `{"text":"","messageId":"m 1","editOf":1}`, nil},
		{"turn request extra", "turn-request", `{"text":"hi","extra":1}`, []string{"/extra"}},
		{"turn request bad", "turn-request", `{"messageId":"","editOf":0}`, []string{"/text", "/messageId", "/editOf"}},
		{"turn request messageId too long", "turn-request", `{"text":"x","messageId":"` + strings.Repeat("a", 129) + `"}`, []string{"/messageId"}},
		{"turn request messageId not ascii", "turn-request", `{"text":"x","messageId":"é"}`, []string{"/messageId"}},
		{"turn accepted ok", "turn-accepted", `{"messageId":"m1","delivered":true}`, nil},
		{"turn accepted bad", "turn-accepted", `{"delivered":"yes"}`, []string{"/messageId", "/delivered"}},

		{"start ok", "start-request", `{"id":"c-1.a_b","mode":"shared","participants":[{"actor":"bob"}]}`, nil},
		{"start empty", "start-request", `{}`, nil},
		{"start bad id", "start-request", `{"id":"-x"}`, []string{"/id"}},
		{"start strict identity", "start-request", `{"participants":[{"actor":"bob","actr":"typo"}]}`, []string{"/participants/0/actr"}},
		{"close ok", "close-request", `{}`, nil},
		{"close not empty", "close-request", `{"why":"done"}`, []string{"/why"}},

		{"participants ok", "participants", `{"owner":` + identity + `,"participants":[]}`, nil},
		{"participants bad", "participants", `{"participants":[{"tenant":"t"}]}`, []string{"/owner", "/participants/0/actor"}},
		{"participants change ok", "participants-change", `{"op":"add","identity":{"actor":"bob"}}`, nil},
		{"participants change bad", "participants-change", `{"op":"invite","identity":{"actor":"bob","role":"x"}}`, []string{"/op", "/identity/role"}},

		{"sse status", "sse-status", status, nil},
		{"sse status bad", "sse-status", `{"id":"c1"}`, []string{"/mode", "/state", "/turns", "/generation", "/owner"}},
		{"sse partial", "sse-partial", `{"turn":1,"text":""}`, nil},
		{"sse partial bad", "sse-partial", `{"turn":0}`, []string{"/turn", "/text"}},
		{"sse message", "sse-message", entry, nil},
		{"sse message bad", "sse-message", `{"cursor":"x"}`, []string{"/cursor", "/turn", "/role", "/status", "/time"}},
		{"sse delta", "sse-delta", `{"turn":2,"text":"he"}`, nil},
		{"sse delta bad", "sse-delta", `{"turn":"2","text":null}`, []string{"/turn", "/text"}},
		{"sse reset", "sse-reset", `{"turn":2}`, nil},
		{"sse reset bad", "sse-reset", `{}`, []string{"/turn"}},
		{"sse closed", "sse-closed", `{}`, nil},
		{"sse closed bad", "sse-closed", `[]`, []string{""}},
		{"sse reconnect", "sse-reconnect", `{"reason":"slow-consumer"}`, nil},
		{"sse reconnect bad", "sse-reconnect", `{"reason":"bored"}`, []string{"/reason"}},
		{"sse error", "sse-error", `{"error":"internal","errorId":"e1"}`, nil},
		{"sse error bad", "sse-error", `{"errorId":1}`, []string{"/error", "/errorId"}},

		{"envelope ok", "envelope", `{"conversationId":"conv-1","kind":"user","id":"msg-0001","iat":1767225599000,"text":"Hello, world!","asker":` + identity + `,"editOf":3,"sig":"` + sig + `"}`, nil},
		{"envelope close ok", "envelope", `{"conversationId":"c1","kind":"close","id":"m2","iat":0,"text":"","asker":` + identity + `,"sig":"` + sig + `"}`, nil},
		{"envelope bad", "envelope", `{"conversationId":".c","kind":"user","id":"m1","iat":1.5,"asker":{"actor":"a","x":1},"editOf":0,"sig":"","extra":true}`,
			[]string{"/conversationId", "/iat", "/text", "/asker/x", "/editOf", "/extra"}},
		{"envelope close without text", "envelope", `{"conversationId":"c1","kind":"close","id":"m2","iat":1,"asker":` + identity + `,"sig":"` + sig + `"}`, nil},
		{"envelope null", "envelope", `{"conversationId":"c1","kind":"user","id":"m1","iat":null,"text":"x","asker":{"actor":"a","tenant":null},"sig":"` + sig + `"}`,
			[]string{"/iat", "/asker/tenant"}},
		{"envelope too late", "envelope", `{"conversationId":"c1","kind":"user","id":"m1","iat":9007199254740992,"text":"x","asker":{"actor":"a"},"sig":"` + sig + `"}`, []string{"/iat"}},
		{"envelope close with edit", "envelope", `{"conversationId":"c1","kind":"close","id":"m2","iat":1,"text":"bye","asker":` + identity + `,"editOf":2,"sig":"` + sig + `"}`,
			[]string{"/editOf"}},

		{"runtime send ok", "runtime-send", `{"messageId":"m1","payload":{"any":"thing"}}`, nil},
		{"runtime send bad", "runtime-send", `{"messageId":"m1","payload":"text","x":1}`, []string{"/payload", "/x"}},
		{"runtime accepted", "runtime-accepted", `{"delivered":false}`, nil},
		{"runtime accepted bad", "runtime-accepted", `{}`, []string{"/delivered"}},
		{"runtime log ok", "runtime-log", `{"events":[{"cursor":"0.1","kind":"inbox","data":null}],"nextCursor":"0.1","done":true}`, nil},
		{"runtime log bad", "runtime-log", `{"events":[{"cursor":"1","kind":""}],"nextCursor":"0.1"}`,
			[]string{"/events/0/cursor", "/events/0/kind", "/events/0/data", "/done"}},

		{"config minimal", "sut-config", `{"listen":"127.0.0.1:8080","dataDir":"/d","signing":{"key":"` + sigKey + `"}}`, nil},
		{"config full", "sut-config", fullConfig, nil},
		{"config missing required", "sut-config", `{}`, []string{"/listen", "/dataDir", "/signing"}},
		{"config typo", "sut-config", `{"listen":":8080","dataDir":"/d","signing":{"key":"` + sigKey + `"},"gateway":{"maxBodyByte":1},"dataDri":"x"}`,
			[]string{"/gateway/maxBodyByte", "/dataDri"}},
		{"config url-safe key", "sut-config", `{"listen":":1","dataDir":"/d","signing":{"key":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY","previousKeys":["-_` + sigKey[2:] + `"]}}`,
			[]string{"/signing/key", "/signing/previousKeys/0"}},
		{"config negative overhead", "sut-config", `{"listen":":1","dataDir":"/d","signing":{"key":"` + sigKey + `"},"conversation":{"budget":{"contextWindow":10,"perMessage":-1}}}`, nil},
		{"config bad tool kind", "sut-config", `{"listen":":1","dataDir":"/d","signing":{"key":"` + sigKey + `"},"tools":{"definitions":[{"name":"a","kind":"robot","idempotent":"no"}]}}`,
			[]string{"/tools/definitions/0/idempotent", "/tools/definitions/0/kind"}},
		{"config bad tool name", "sut-config", `{"listen":":1","dataDir":"/d","signing":{"key":"` + sigKey + `"},"tools":{"definitions":[{"name":"look up"}]}}`,
			[]string{"/tools/definitions/0/name"}},
		{"config bad values", "sut-config", `{"listen":"8080","dataDir":"","signing":{"key":"short"},"model":{"baseURL":"not a url","stream":"yes"},"conversation":{"maxScan":-1,"budget":{}}}`,
			[]string{"/listen", "/dataDir", "/signing/key", "/model/baseURL", "/model/stream", "/conversation/maxScan", "/conversation/budget/contextWindow"}},
	}
}

const fullConfig = `{
  "listen": "[::1]:8080", "dataDir": "/var/lib/loom",
  "model": {"baseURL": "http://127.0.0.1:9000/v1", "name": "m", "apiKey": "k", "stream": false},
  "tools": {"baseURL": "http://127.0.0.1:9001/tools", "definitions": [
    {"name": "lookup", "description": "d", "parameters": {"type": "object"}, "class": "pii", "needsApproval": true},
    {"name": "pay", "idempotent": false}, {"name": "ask", "kind": "human"}]},
  "summarizer": {"url": "http://127.0.0.1:9002/s"},
  "identity": {"url": "http://127.0.0.1:9003/i", "principals": {"tok": {"tenant": "t", "actor": "a", "onBehalfOf": "b", "grants": ["lookup"], "narrowed": true}}, "insecure": false},
  "clearance": {"url": "http://127.0.0.1:9004/c"},
  "errorHook": {"url": "http://127.0.0.1:9005/e"},
  "signing": {"key": "` + sigKey + `", "previousKeys": ["` + sigKey + `"]},
  "conversation": {"systemPrompt": "p", "bargeIn": true, "rotateEveryTurns": 10, "maxTurnChars": 1000, "maxScan": 500,
    "maxCarryBytes": 1, "maxWindowTurns": 1, "maxEnvelopeAgeMs": 1, "maxInvalidRecords": 1, "maxIterations": 1,
    "parallelTools": true, "toolTimeoutMs": 1, "budget": {"contextWindow": 8000, "reserveOutputTokens": 1, "maxSummaryTokens": 1, "perMessage": 1}},
  "gateway": {"allowedOrigins": ["https://app.example"], "allowedHosts": ["localhost"], "allowCredentials": true,
    "maxStreams": 1, "maxStreamsPerPrincipal": 1, "maxSubscribers": 1, "maxBodyBytes": 1, "streamLifetimeMs": 1,
    "maxPendingBytes": 1, "postsPerMinute": 1, "reauthMs": 1, "pollMs": 1},
  "shared": {"servicePrincipal": {"actor": "svc"}, "maxParticipants": 1, "maxQueuedPerAsker": 1}
}`

func TestValidate(t *testing.T) {
	for _, tc := range schemaCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.schema, []byte(tc.doc))
			if tc.pointers == nil {
				assert.NoError(t, err)
				return
			}
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			assert.Equal(t, tc.schema, verr.Schema)
			var got []string // distinct: one place may break several rules
			for _, p := range verr.Problems {
				assert.NotEmpty(t, p.Message)
				if !slices.Contains(got, p.Pointer) {
					got = append(got, p.Pointer)
				}
			}
			assert.ElementsMatch(t, tc.pointers, got)
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for _, tc := range schemaCases()[i%4:] {
				_ = Validate(tc.schema, []byte(tc.doc))
			}
		})
	}
	wg.Wait()
}

func TestPointer(t *testing.T) {
	assert.Equal(t, "", Pointer(nil))
	assert.Equal(t, "/a/b~1c/d~0e", Pointer([]string{"a", "b/c", "d~e"}))
}

func ExampleValidate() {
	err := Validate("turn-request", []byte(`{"text":"hi","extra":1}`))
	var verr *ValidationError
	if errors.As(err, &verr) {
		for _, p := range verr.Problems {
			fmt.Println(p.Pointer)
		}
	}
	// Output: /extra
}

// TestEnvelopeVectors checks the envelope schema against the shared envelope vectors: a payload
// the vectors accept (or refuse for a reason other than its shape) satisfies the schema, and a
// payload they refuse as malformed does not, unless the fault is below what a schema sees (the
// JSON syntax itself: number spelling, duplicate members, escapes, encoding).
func TestEnvelopeVectors(t *testing.T) {
	raw, err := os.ReadFile("../fixtures/envelopes/vectors.json")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no envelope vectors")
	}
	require.NoError(t, err)
	var vectors struct {
		Signing []struct {
			Name     string          `json:"name"`
			Envelope json.RawMessage `json:"envelope"`
		} `json:"signing"`
		Check struct {
			Vectors []struct {
				Name      string `json:"name"`
				Raw       string `json:"raw"`
				RawBase64 string `json:"rawBase64"`
				Reason    string `json:"reason"`
			} `json:"vectors"`
		} `json:"check"`
	}
	require.NoError(t, json.Unmarshal(raw, &vectors))
	for _, v := range vectors.Signing {
		assert.NoError(t, Validate("envelope", v.Envelope), v.Name)
	}
	lexical := []string{"duplicate", "fraction", "exponent", "surrogate", "utf8", "leading-zero", "escape", "control", "trailing", "sign"}
	for _, v := range vectors.Check.Vectors {
		payload := []byte(v.Raw)
		if v.RawBase64 != "" {
			payload, err = base64.StdEncoding.DecodeString(v.RawBase64)
			require.NoError(t, err, v.Name)
		}
		err := Validate("envelope", payload)
		if v.Reason != "malformed" {
			assert.NoError(t, err, v.Name)
			continue
		}
		if err == nil && !slices.ContainsFunc(lexical, func(s string) bool { return strings.Contains(v.Name, s) }) {
			t.Errorf("%s: malformed, yet the schema accepts it", v.Name)
		}
	}
}
