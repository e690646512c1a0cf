package contract

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/spec"
)

var (
	shared     *Validator
	sharedErr  error
	sharedOnce sync.Once
)

func validator(t *testing.T) *Validator {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New() })
	require.NoError(t, sharedErr)
	return shared
}

// at is the Route and Pointer of an expected violation.
type at struct{ Route, Pointer string }

// locations lists the distinct places of viols: one place may fail several rules.
func locations(viols []Violation) []at {
	out := []at{}
	for _, v := range viols {
		if !slices.Contains(out, at{v.Route, v.Pointer}) {
			out = append(out, at{v.Route, v.Pointer})
		}
	}
	return out
}

const (
	jsonCT   = "application/json; charset=utf-8"
	identity = `{"tenant":"acme","actor":"alice"}`
	status   = `{"id":"c1","mode":"owner","state":"open","turns":2,"generation":0,"owner":` + identity + `}`
	accepted = `{"cursor":"0.7","ord":3,"turn":2,"role":"user","status":"accepted","text":"hi","messageId":"m1","asker":` + identity + `,"time":"2026-11-29T10:00:00.000Z"}`
	reply    = `{"cursor":"0.8","ord":4,"turn":2,"role":"assistant","status":"complete","text":"hello","asker":` + identity + `,"time":"2026-11-29T10:00:01Z","turnExecutionId":"x1"}`
	hidden   = `{"cursor":"0.9","ord":5,"turn":3,"role":"user","status":"restricted","asker":{"actor":"bob"},"time":"2026-11-29T10:00:02Z"}`
)

// headers builds response headers: nosniff and the given content type (none when ct is "").
func headers(ct string, kv ...string) http.Header {
	h := http.Header{}
	h.Set("X-Content-Type-Options", "nosniff")
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			h.Del(kv[i])
		} else {
			h.Add(kv[i], kv[i+1])
		}
	}
	return h
}

type exchange struct {
	name   string
	method string
	target string
	body   string
	status int
	header http.Header
	resp   string
	want   []at
}

func TestResponse(t *testing.T) {
	const (
		disc    = "GET /.well-known/loom"
		start   = "POST /conversations"
		get     = "GET /conversations/{id}"
		turns   = "POST /conversations/{id}/turns"
		closeR  = "POST /conversations/{id}/close"
		hist    = "GET /conversations/{id}/history"
		events  = "GET /conversations/{id}/events"
		parts   = "GET /conversations/{id}/participants"
		partsP  = "POST /conversations/{id}/participants"
		rtSend  = "POST /runtime/executions/{id}/messages"
		rtLog   = "GET /runtime/executions/{id}/log"
		options = "OPTIONS /conversations/{id}/turns"
	)
	notFound := `{"error":"not found"}`
	cases := []exchange{
		// discovery
		{"discovery ok", "GET", "/.well-known/loom", "", 200, headers(jsonCT),
			`{"specVersion":"0.1.0","profiles":["core","durability"],"implementation":{"name":"loom-reference","version":"0.1.0"},"runtimeDoor":true,"extra":1}`, nil},
		{"discovery missing fields", "GET", "/.well-known/loom", "", 200, headers(jsonCT),
			`{"specVersion":"0.1.0","implementation":{"name":"x"}}`, []at{{disc, "/profiles"}, {disc, "/implementation/version"}}},
		{"discovery wrong type", "GET", "/.well-known/loom", "", 200, headers(jsonCT),
			`{"specVersion":"0.1.0","profiles":"core","implementation":{"name":"x","version":"1"},"runtimeDoor":"yes"}`,
			[]at{{disc, "/profiles"}, {disc, "/runtimeDoor"}}},
		{"discovery undocumented status", "GET", "/.well-known/loom", "", 401, headers(jsonCT),
			`{"error":"unauthenticated"}`, []at{{disc, PointerStatus}}},
		{"discovery missing nosniff", "GET", "/.well-known/loom", "", 200, headers(jsonCT, "X-Content-Type-Options", ""),
			`{"specVersion":"0.1.0","profiles":[],"implementation":{"name":"x","version":"1"}}`, []at{{disc, "header:X-Content-Type-Options"}}},
		{"discovery wrong nosniff", "GET", "/.well-known/loom", "", 200, headers("application/json", "X-Content-Type-Options", "", "X-Content-Type-Options", "sniff"),
			`{"specVersion":"0.1.0","profiles":[],"implementation":{"name":"x","version":"1"}}`, []at{{disc, "header:X-Content-Type-Options"}}},
		{"discovery not json", "GET", "/.well-known/loom", "", 200, headers("text/html"),
			`<html>`, []at{{disc, "header:Content-Type"}}},
		{"discovery no content type", "GET", "/.well-known/loom", "", 200, headers(""),
			`{}`, []at{{disc, "header:Content-Type"}}},

		// start
		{"start created", "POST", "/conversations", `{"id":"c1"}`, 201, headers(jsonCT), status, nil},
		{"start again", "POST", "/conversations", `{"id":"c1"}`, 200, headers(jsonCT), status, nil},
		{"start wrong status", "POST", "/conversations", `{}`, 202, headers(jsonCT), status, []at{{start, PointerStatus}}},
		{"start status missing owner and bad mode", "POST", "/conversations", `{}`, 201, headers(jsonCT),
			`{"id":"c1","mode":"group","state":"open","turns":0,"generation":0}`, []at{{start, "/mode"}, {start, "/owner"}}},
		{"start conflict", "POST", "/conversations", `{"id":"c1"}`, 409, headers(jsonCT), `{"error":"conflict"}`, nil},
		{"start conflict wrong code", "POST", "/conversations", `{"id":"c1"}`, 409, headers(jsonCT), `{"error":"not found"}`, []at{{start, "/error"}}},
		{"start invalid id", "POST", "/conversations", `{"id":"-"}`, 400, headers(jsonCT), `{"error":"invalid id"}`, nil},
		{"start invalid cursor is not a start error", "POST", "/conversations", `{}`, 400, headers(jsonCT), `{"error":"invalid cursor"}`, []at{{start, "/error"}}},
		{"start 415", "POST", "/conversations", `x`, 415, headers(jsonCT), `{"error":"unsupported media type"}`, nil},
		{"start 413", "POST", "/conversations", `{}`, 413, headers(jsonCT), `{"error":"payload too large"}`, nil},
		{"start 404 undocumented", "POST", "/conversations", `{}`, 404, headers(jsonCT), notFound, []at{{start, PointerStatus}}},

		// authentication and the shared errors
		{"401 ok", "GET", "/conversations/c1", "", 401, headers(jsonCT, "WWW-Authenticate", "Bearer"), `{"error":"unauthenticated"}`, nil},
		{"401 without challenge", "GET", "/conversations/c1", "", 401, headers(jsonCT), `{"error":"unauthenticated"}`, []at{{get, "header:WWW-Authenticate"}}},
		{"401 basic challenge", "GET", "/conversations/c1", "", 401, headers(jsonCT, "WWW-Authenticate", `Basic realm="x"`), `{"error":"unauthenticated"}`, []at{{get, "header:WWW-Authenticate"}}},
		{"403 origin with cors", "GET", "/conversations/c1", "", 403, headers(jsonCT, "Access-Control-Allow-Origin", "https://app.example", "Vary", "Accept-Encoding, Origin"),
			`{"error":"forbidden origin"}`, nil},
		{"cors without vary", "GET", "/conversations/c1", "", 200, headers(jsonCT, "Access-Control-Allow-Origin", "https://app.example"), status, []at{{get, "header:Vary"}}},
		{"cors wildcard", "GET", "/conversations/c1", "", 200, headers(jsonCT, "Access-Control-Allow-Origin", "*", "Vary", "Origin"), status, []at{{get, "header:Access-Control-Allow-Origin"}}},
		{"cors credentials false", "GET", "/conversations/c1", "", 200, headers(jsonCT, "Access-Control-Allow-Origin", "https://a", "Vary", "Origin", "Access-Control-Allow-Credentials", "false"),
			status, []at{{get, "header:Access-Control-Allow-Credentials"}}},
		{"404 exact", "GET", "/conversations/c1", "", 404, headers(jsonCT), notFound, nil},
		{"404 with detail", "GET", "/conversations/c1", "", 404, headers(jsonCT), `{"error":"not found","detail":"no such conversation"}`, []at{{get, ""}}},
		{"404 other code", "GET", "/conversations/c1", "", 404, headers(jsonCT), `{"error":"forbidden"}`, []at{{get, ""}}},
		{"429 ok", "GET", "/conversations/c1", "", 429, headers(jsonCT, "Retry-After", "3"), `{"error":"too many requests"}`, nil},
		{"429 bad retry-after", "GET", "/conversations/c1", "", 429, headers(jsonCT, "Retry-After", "soon"), `{"error":"too many requests"}`, []at{{get, "header:Retry-After"}}},
		{"500 ok", "GET", "/conversations/c1", "", 500, headers(jsonCT), `{"error":"internal","errorId":"e-1"}`, nil},
		{"500 without errorId", "GET", "/conversations/c1", "", 500, headers(jsonCT), `{"error":"internal"}`, []at{{get, "/errorId"}}},
		{"500 every problem at once", "GET", "/conversations/c1", "", 500, headers("application/json", "X-Content-Type-Options", ""), `{"error":"boom","errorId":7}`,
			[]at{{get, "header:X-Content-Type-Options"}, {get, "/error"}, {get, "/errorId"}}},

		// get
		{"get ok", "GET", "/conversations/c1", "", 200, headers(jsonCT), status, nil},
		{"get turns wrong type", "GET", "/conversations/c1", "", 200, headers(jsonCT), strings.Replace(status, `"turns":2`, `"turns":"2"`, 1), []at{{get, "/turns"}}},
		{"get 400 undocumented", "GET", "/conversations/c1", "", 400, headers(jsonCT), `{"error":"invalid id"}`, []at{{get, PointerStatus}}},

		// turns
		{"turn accepted", "POST", "/conversations/c1/turns", `{"text":"hi"}`, 202, headers(jsonCT), `{"messageId":"m1","delivered":true}`, nil},
		{"turn accepted missing delivered", "POST", "/conversations/c1/turns", `{"text":"hi"}`, 202, headers(jsonCT), `{"messageId":"m1"}`, []at{{turns, "/delivered"}}},
		{"turn 200 undocumented", "POST", "/conversations/c1/turns", `{"text":"hi"}`, 200, headers(jsonCT), `{"messageId":"m1","delivered":true}`, []at{{turns, PointerStatus}}},
		{"turn 404 leaks existence", "POST", "/conversations/c1/turns", `{"text":"hi"}`, 404, headers(jsonCT), `{"error":"not found","conversation":"c1"}`, []at{{turns, ""}}},
		{"turn bad request", "POST", "/conversations/c1/turns", `{"text":1}`, 400, headers(jsonCT), `{"error":"bad request","detail":"text"}`, nil},

		// close
		{"close accepted", "POST", "/conversations/c1/close", ``, 202, headers(jsonCT), `{"messageId":"m2","delivered":true}`, nil},
		{"close delivered wrong type", "POST", "/conversations/c1/close", `{}`, 202, headers(jsonCT), `{"messageId":"m2","delivered":1}`, []at{{closeR, "/delivered"}}},

		// history
		{"history ok", "GET", "/conversations/c1/history?cursor=0.0&direction=backward&limit=10", "", 200, headers(jsonCT),
			`{"entries":[` + accepted + `,` + reply + `,` + hidden + `],"nextCursor":"0.9","done":true}`, nil},
		{"history empty page", "GET", "/conversations/c1/history", "", 200, headers(jsonCT), `{"entries":[],"nextCursor":"0.0","done":false}`, nil},
		{"history missing nextCursor", "GET", "/conversations/c1/history", "", 200, headers(jsonCT), `{"entries":[],"done":true}`, []at{{hist, "/nextCursor"}}},
		{"history bad cursor and ord", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[` + strings.Replace(strings.Replace(accepted, `"0.7"`, `"7"`, 1), `"ord":3`, `"ord":0`, 1) + `],"nextCursor":"0.7","done":true}`,
			[]at{{hist, "/entries/0/cursor"}, {hist, "/entries/0/ord"}}},
		{"history negative turn", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[` + strings.Replace(accepted, `"turn":2`, `"turn":-1`, 1) + `],"nextCursor":"0.7","done":true}`, []at{{hist, "/entries/0/turn"}}},
		{"history bad time", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[` + strings.Replace(reply, `2026-11-29T10:00:01Z`, `29/11/2026`, 1) + `],"nextCursor":"0.8","done":true}`, []at{{hist, "/entries/0/time"}}},
		{"history restricted leaks", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[` + accepted + `,` + strings.Replace(hidden, `"status":"restricted"`, `"status":"restricted","text":"secret","reason":"x","classes":["pii"],"turnExecutionId":"t","errorId":"e","editOf":1`, 1) + `],"nextCursor":"0.9","done":true}`,
			[]at{{hist, "/entries/1/text"}, {hist, "/entries/1/reason"}, {hist, "/entries/1/classes"}, {hist, "/entries/1/turnExecutionId"}, {hist, "/entries/1/errorId"}, {hist, "/entries/1/editOf"}}},
		{"history unknown status", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[` + strings.Replace(reply, `"complete"`, `"done"`, 1) + `],"nextCursor":"0.8","done":true}`, []at{{hist, "/entries/0/status"}}},
		{"history rejected record with text", "GET", "/conversations/c1/history", "", 200, headers(jsonCT),
			`{"entries":[{"cursor":"0.3","ord":2,"turn":0,"role":"user","status":"rejected","reason":"stale","text":"hi","time":"2026-11-29T10:00:00Z"}],"nextCursor":"0.3","done":true}`,
			[]at{{hist, "/entries/0/text"}}},
		{"history invalid cursor", "GET", "/conversations/c1/history?cursor=abc", "", 400, headers(jsonCT), `{"error":"invalid cursor"}`, nil},

		// events: status and headers only
		{"events ok", "GET", "/conversations/c1/events", "", 200, headers("text/event-stream"), "event: status\ndata: {}\n\n", nil},
		{"events without nosniff", "GET", "/conversations/c1/events", "", 200, headers("text/event-stream", "X-Content-Type-Options", ""), "", []at{{events, "header:X-Content-Type-Options"}}},
		{"events as json", "GET", "/conversations/c1/events", "", 200, headers(jsonCT), "{}", []at{{events, "header:Content-Type"}}},
		{"events 429", "GET", "/conversations/c1/events", "", 429, headers(jsonCT), `{"error":"too many requests"}`, nil},

		// participants
		{"participants ok", "GET", "/conversations/c1/participants", "", 200, headers(jsonCT), `{"owner":` + identity + `,"participants":[{"actor":"bob"}]}`, nil},
		{"participants missing actor", "GET", "/conversations/c1/participants", "", 200, headers(jsonCT), `{"owner":{"tenant":"t"},"participants":[{"actor":""}]}`,
			[]at{{parts, "/owner/actor"}, {parts, "/participants/0/actor"}}},
		{"participants change ok", "POST", "/conversations/c1/participants", `{"op":"add","identity":{"actor":"bob"}}`, 200, headers(jsonCT), `{"owner":` + identity + `,"participants":[{"actor":"bob"}]}`, nil},
		{"participants change wrong shape", "POST", "/conversations/c1/participants", `{"op":"add","identity":{"actor":"bob"}}`, 200, headers(jsonCT), `{"owner":` + identity + `,"participants":{}}`, []at{{partsP, "/participants"}}},

		// runtime door
		{"runtime send ok", "POST", "/runtime/executions/e1/messages", `{"messageId":"m1","payload":{}}`, 202, headers(jsonCT), `{"delivered":false}`, nil},
		{"runtime send bad", "POST", "/runtime/executions/e1/messages", `{"messageId":"m1","payload":{}}`, 202, headers(jsonCT), `{}`, []at{{rtSend, "/delivered"}}},
		{"runtime send 404", "POST", "/runtime/executions/e1/messages", `{"messageId":"m1","payload":{}}`, 404, headers(jsonCT), notFound, nil},
		{"runtime log ok", "GET", "/runtime/executions/e1/log?cursor=0.0&limit=5", "", 200, headers(jsonCT),
			`{"events":[{"cursor":"0.1","kind":"inbox","data":{"x":1}}],"nextCursor":"0.1","done":true}`, nil},
		{"runtime log bad", "GET", "/runtime/executions/e1/log", "", 200, headers(jsonCT),
			`{"events":[{"cursor":"0.1","kind":"inbox"}],"nextCursor":1,"done":true}`, []at{{rtLog, "/events/0/data"}, {rtLog, "/nextCursor"}}},

		// preflight
		{"preflight ok", "OPTIONS", "/conversations/c1/turns", "", 204,
			headers("", "Access-Control-Allow-Origin", "https://app.example", "Vary", "Origin", "Access-Control-Allow-Methods", "POST", "Access-Control-Max-Age", "600"), "", nil},
		{"preflight with body", "OPTIONS", "/conversations/c1/turns", "", 204, headers(""), "hello", []at{{options, ""}}},
		{"preflight bad max-age", "OPTIONS", "/conversations/c1/turns", "", 204, headers("", "Access-Control-Max-Age", "ten"), "", []at{{options, "header:Access-Control-Max-Age"}}},

		// unknown routes
		{"unknown path", "GET", "/nope", "", 200, headers(jsonCT), `{}`, []at{{"GET /nope", PointerRoute}}},
		{"unknown method", "DELETE", "/conversations/c1", "", 204, headers(""), ``, []at{{"DELETE /conversations/c1", PointerRoute}}},
		{"trailing slash", "GET", "/conversations/c1/", "", 200, headers(jsonCT), status, []at{{"GET /conversations/c1/", PointerRoute}}},
	}
	v := validator(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://sut.example:8080"+tc.target, nil)
			got := v.Response(req, []byte(tc.body), tc.status, tc.header, []byte(tc.resp))
			for _, viol := range got {
				assert.NotEmpty(t, viol.Message)
			}
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.ElementsMatch(t, tc.want, locations(got))
		})
	}
}

func TestRequest(t *testing.T) {
	const (
		start  = "POST /conversations"
		turns  = "POST /conversations/{id}/turns"
		closeR = "POST /conversations/{id}/close"
		hist   = "GET /conversations/{id}/history"
		events = "GET /conversations/{id}/events"
		partsP = "POST /conversations/{id}/participants"
		rtSend = "POST /runtime/executions/{id}/messages"
		rtLog  = "GET /runtime/executions/{id}/log"
		get    = "GET /conversations/{id}"
	)
	type request struct {
		name   string
		method string
		target string
		header http.Header
		body   string
		want   []at
	}
	js := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []request{
		{"discovery", "GET", "/.well-known/loom", nil, "", nil},
		{"start full", "POST", "/conversations", js(), `{"id":"c-1","mode":"shared","participants":[{"actor":"bob","tenant":"t"}]}`, nil},
		{"start empty object", "POST", "/conversations", js(), `{}`, nil},
		{"start without body", "POST", "/conversations", js(), ``, []at{{start, ""}}},
		{"start bad", "POST", "/conversations", js(), `{"id":"_x","mode":"solo","participants":[{"actr":"bob"}],"extra":true}`,
			[]at{{start, "/id"}, {start, "/mode"}, {start, "/participants/0/actor"}, {start, "/participants/0/actr"}, {start, "/extra"}}},
		{"start wrong content type", "POST", "/conversations", http.Header{"Content-Type": {"text/plain"}}, `{}`, []at{{start, "header:Content-Type"}}},
		{"start not json", "POST", "/conversations", js(), `{`, []at{{start, ""}}},
		{"turn ok", "POST", "/conversations/c1/turns", js(), `{"text":"","messageId":"m 1","editOf":2}`, nil},
		{"turn missing text", "POST", "/conversations/c1/turns", js(), `{"messageId":"m1"}`, []at{{turns, "/text"}}},
		{"turn wrong types", "POST", "/conversations/c1/turns", js(), `{"text":1,"editOf":"1","messageId":""}`,
			[]at{{turns, "/text"}, {turns, "/editOf"}, {turns, "/messageId"}}},
		{"turn unknown field", "POST", "/conversations/c1/turns", js(), `{"text":"hi","txt":"hi"}`, []at{{turns, "/txt"}}},
		{"close without body", "POST", "/conversations/c1/close", nil, ``, nil},
		{"close empty object", "POST", "/conversations/c1/close", js(), `{}`, nil},
		{"close with field", "POST", "/conversations/c1/close", js(), `{"reason":"done"}`, []at{{closeR, "/reason"}}},
		{"history ok", "GET", "/conversations/c1/history?cursor=12.34&direction=forward&limit=500", nil, "", nil},
		{"history bad query", "GET", "/conversations/c1/history?cursor=1&direction=up&limit=501", nil, "",
			[]at{{hist, "query:cursor"}, {hist, "query:direction"}, {hist, "query:limit"}}},
		{"history limit not a number", "GET", "/conversations/c1/history?limit=ten", nil, "", []at{{hist, "query:limit"}}},
		{"history with body", "GET", "/conversations/c1/history", js(), `{}`, []at{{hist, ""}}},
		{"events resume", "GET", "/conversations/c1/events", http.Header{"Last-Event-ID": {"0.7"}}, "", nil},
		{"events bad resume", "GET", "/conversations/c1/events?cursor=x", http.Header{"Last-Event-ID": {"seven"}}, "",
			[]at{{events, "query:cursor"}, {events, "header:Last-Event-ID"}}},
		{"participants change", "POST", "/conversations/c1/participants", js(), `{"op":"remove","identity":{"actor":"bob"}}`, nil},
		{"participants change bad", "POST", "/conversations/c1/participants", js(), `{"op":"kick","identity":{"actor":"bob","role":"admin"}}`,
			[]at{{partsP, "/op"}, {partsP, "/identity/role"}}},
		{"runtime send", "POST", "/runtime/executions/e1/messages", js(), `{"messageId":"m1","payload":{"kind":"user"}}`, nil},
		{"runtime send bad", "POST", "/runtime/executions/e1/messages", js(), `{"payload":[]}`, []at{{rtSend, "/messageId"}, {rtSend, "/payload"}}},
		{"runtime log", "GET", "/runtime/executions/e1/log?cursor=0.0&limit=1", nil, "", nil},
		{"runtime log bad", "GET", "/runtime/executions/e1/log?limit=0", nil, "", []at{{rtLog, "query:limit"}}},
		{"credentials are not judged", "GET", "/conversations/c1", http.Header{"Authorization": {"Basic eDp5"}}, "", nil},
		{"preflight", "OPTIONS", "/.well-known/loom", http.Header{"Origin": {"https://app.example"}}, "", nil},
		{"unknown route", "POST", "/conversations/c1/archive", js(), `{}`, []at{{"POST /conversations/c1/archive", PointerRoute}}},
		{"unknown method", "PUT", "/conversations/c1", js(), `{}`, []at{{"PUT /conversations/c1", PointerRoute}}},
		{"get", "GET", "/conversations/c1.v2", nil, "", nil},
	}
	_ = get
	v := validator(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://10.0.0.1:9999"+tc.target, nil)
			for k, vs := range tc.header {
				for _, value := range vs {
					req.Header.Add(k, value)
				}
			}
			got := v.Request(req, []byte(tc.body))
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.ElementsMatch(t, tc.want, locations(got))
		})
	}
}

func TestEvent(t *testing.T) {
	cases := []struct {
		name  string
		event string
		data  string
		want  []string // pointers; nil: no violation
	}{
		{"status", "status", status, nil},
		{"status bad", "status", `{"id":"c1","mode":"owner","state":"gone","turns":1,"generation":0}`, []string{"/state", "/owner"}},
		{"partial", "partial", `{"turn":1,"text":"he"}`, nil},
		{"partial bad", "partial", `{"turn":"1"}`, []string{"/turn", "/text"}},
		{"message", "message", accepted, nil},
		{"message restricted leak", "message", strings.Replace(hidden, `"asker"`, `"text":"secret","asker"`, 1), []string{"/text"}},
		{"delta", "delta", `{"turn":2,"text":"llo"}`, nil},
		{"delta bad", "delta", `{"turn":0,"text":5}`, []string{"/turn", "/text"}},
		{"reset", "reset", `{"turn":2}`, nil},
		{"reset bad", "reset", `{"turn":-2}`, []string{"/turn"}},
		{"closed", "closed", `{}`, nil},
		{"closed bad", "closed", `"closed"`, []string{""}},
		{"reconnect", "reconnect", `{"reason":"lifetime"}`, nil},
		{"reconnect bad", "reconnect", `{"reason":"tired"}`, []string{"/reason"}},
		{"error", "error", `{"error":"internal","errorId":"e1"}`, nil},
		{"error bad", "error", `{}`, []string{"/error"}},
		{"not json", "delta", `{"turn":`, []string{""}},
		{"unknown event", "typing", `{}`, []string{PointerEvent}},
		{"empty event type", "", `{}`, []string{PointerEvent}},
	}
	v := validator(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := v.Event(tc.event, []byte(tc.data))
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			var pointers []string
			for _, viol := range got {
				assert.Equal(t, EventsRoute, viol.Route)
				assert.NotEmpty(t, viol.Message)
				pointers = append(pointers, viol.Pointer)
			}
			assert.ElementsMatch(t, tc.want, pointers)
		})
	}
}

// TestConcurrentUse runs the checks from many goroutines at once (for the race detector) and
// checks that the inputs are left as they were.
func TestConcurrentUse(t *testing.T) {
	v := validator(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				req := httptest.NewRequest("GET", "/conversations/c1/history?limit=3", nil)
				h := headers(jsonCT)
				body := []byte(`{"entries":[` + accepted + `],"nextCursor":"0.7","done":true}`)
				assert.Empty(t, v.Request(req, nil))
				assert.Empty(t, v.Response(req, nil, 200, h, body))
				assert.Equal(t, "limit=3", req.URL.RawQuery)
				assert.Len(t, h, 2)
				assert.Len(t, v.Response(req, nil, 200, h, []byte(`{"entries":[],"done":1}`)), 2)
				assert.Empty(t, v.Event("message", []byte(reply)))
				post := httptest.NewRequest("POST", "/conversations/c1/turns", strings.NewReader(`{"text":"x"}`))
				post.Header.Set("Content-Type", "application/json")
				assert.Empty(t, v.Request(post, []byte(`{"text":"x"}`)))
			}
		})
	}
	wg.Wait()
}

// TestEventTypesMatchTheDocument checks that the event types this package knows are the ones the
// OpenAPI document lists for the stream.
func TestEventTypesMatchTheDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(spec.OpenAPI())
	require.NoError(t, err)
	stream := doc.Components.Responses["EventStream"]
	require.NotNil(t, stream)
	listed, ok := stream.Value.Extensions["x-sse-events"].(map[string]any)
	require.True(t, ok)
	var names []string
	for name, ref := range listed {
		names = append(names, name)
		component, _ := strings.CutPrefix(ref.(string), "#/components/schemas/")
		assert.NotNil(t, doc.Components.Schemas[component], name)
	}
	assert.ElementsMatch(t, EventTypes(), names)
}

func TestNewIsRepeatable(t *testing.T) {
	a, err := New()
	require.NoError(t, err)
	b, err := New()
	require.NoError(t, err)
	req := httptest.NewRequest("GET", "/conversations/c1", nil)
	assert.Equal(t, a.Response(req, nil, 404, headers(jsonCT), []byte(`{"error":"x"}`)),
		b.Response(req, nil, 404, headers(jsonCT), []byte(`{"error":"x"}`)))
}

// TestViolationSchema checks that each kind of violation names where the contract states the
// rule it broke: the header's declaration, the body's schema, the operation's responses, the
// event's schema file.
func TestViolationSchema(t *testing.T) {
	v := validator(t)
	req := httptest.NewRequest("GET", "http://sut.example:8080/conversations/c1", nil)
	base := "#/paths/~1conversations~1{id}/get/responses"
	cases := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   []string
	}{
		{"missing header", 200, headers(jsonCT, "X-Content-Type-Options", ""), status, []string{base + "/200/headers/X-Content-Type-Options"}},
		{"body", 200, headers(jsonCT), `{"id":"c1"}`, nil},
		{"undocumented status", 418, headers(jsonCT), `{}`, []string{base}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := v.Response(req, nil, tc.status, tc.header, []byte(tc.body))
			require.NotEmpty(t, got)
			var schemas []string
			for _, viol := range got {
				schemas = append(schemas, viol.Schema)
			}
			if tc.want == nil {
				for _, s := range schemas {
					assert.Equal(t, base+"/200/content/application~1json/schema", s)
				}
				return
			}
			assert.Equal(t, tc.want, schemas)
		})
	}
	ev := v.Event("delta", []byte(`{"turn":"two"}`))
	require.NotEmpty(t, ev)
	assert.Equal(t, "schemas/sse-delta.schema.json", ev[0].Schema)
	unknown := v.Event("nope", []byte(`{}`))
	require.Len(t, unknown, 1)
	assert.Empty(t, unknown[0].Schema)
}
