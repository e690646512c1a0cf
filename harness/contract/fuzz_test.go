package contract

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The requests a system's answers are judged against: one per operation of the surface.
var fuzzRequests = []struct{ method, path string }{
	{"GET", "/.well-known/loom"},
	{"POST", "/conversations"},
	{"GET", "/conversations/c1"},
	{"POST", "/conversations/c1/turns"},
	{"POST", "/conversations/c1/close"},
	{"GET", "/conversations/c1/history?cursor=0.1&limit=5"},
	{"GET", "/conversations/c1/events"},
	{"GET", "/conversations/c1/participants"},
	{"POST", "/conversations/c1/participants"},
	{"POST", "/runtime/executions"},
	{"POST", "/runtime/executions/c1/messages"},
	{"GET", "/runtime/executions/c1/log"},
	{"GET", "/not/a/route"},
}

var fuzzCTs = []string{"application/json", "application/json; charset=utf-8", "", "text/event-stream",
	"text/plain", "application/json; charset", "APPLICATION/JSON", "application/problem+json"}

// FuzzResponse judges an arbitrary answer (status, Content-Type, a header value, body) to each
// operation, as a hostile system could send it. Invariants: no panic; a status the operation
// does not document is reported, alone, at PointerStatus; a JSON answer whose body is not JSON is
// a violation; every violation names its route and says what was wanted.
//
// Seeds: answers of the reference (status, errors, pages), broken variants, testdata/fuzz.
func FuzzResponse(f *testing.F) {
	f.Add(uint8(2), uint16(200), uint8(1), "nosniff", []byte(status))
	f.Add(uint8(5), uint16(200), uint8(0), "nosniff", []byte(`{"entries":[`+accepted+`,`+reply+`,`+hidden+`],"nextCursor":"0.9","done":true}`))
	f.Add(uint8(3), uint16(202), uint8(0), "nosniff", []byte(`{"messageId":"m1","delivered":true}`))
	f.Add(uint8(3), uint16(404), uint8(0), "nosniff", []byte(`{"error":"not found"}`))
	f.Add(uint8(3), uint16(500), uint8(0), "nosniff", []byte(`{"error":"internal"}`))
	f.Add(uint8(6), uint16(200), uint8(3), "nosniff", []byte("event: status\ndata: {}\n\n"))
	f.Add(uint8(1), uint16(201), uint8(0), "", []byte(`{"id":1}`))
	f.Add(uint8(5), uint16(200), uint8(0), "nosniff", []byte(`{"entries":null,"nextCursor":7}`))
	f.Add(uint8(0), uint16(200), uint8(0), "nosniff", []byte(`{"specVersion":"0.1.0","profiles":["core"],"implementation":{"name":"x","version":"1"},"runtimeDoor":false}`))
	f.Add(uint8(12), uint16(999), uint8(4), "x", []byte("\xff"))
	f.Fuzz(func(t *testing.T, route uint8, code uint16, ct uint8, nosniff string, body []byte) {
		v := fuzzValidator(t)
		rq := fuzzRequests[int(route)%len(fuzzRequests)]
		req := httptest.NewRequest(rq.method, rq.path, nil)
		h := http.Header{}
		if strings.ContainsAny(nosniff, "\r\n") {
			nosniff = "nosniff"
		}
		h.Set("X-Content-Type-Options", nosniff)
		ctype := fuzzCTs[int(ct)%len(fuzzCTs)]
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		st := int(code)
		vs := v.Response(req, nil, st, h, body)
		for _, vi := range vs {
			if vi.Route == "" || vi.Message == "" {
				t.Fatalf("violation without route or message: %+v", vi)
			}
		}
		for _, vi := range vs {
			if vi.Pointer == PointerStatus && len(vs) != 1 {
				t.Fatalf("an undocumented status is reported with other violations: %v", vs)
			}
		}
		if len(vs) == 0 && mediaType(ctype) == "application/json" && !json.Valid(body) && len(body) > 0 {
			t.Fatalf("%s %s: %d %q with a body that is not JSON passes: %q", rq.method, rq.path, st, ctype, body)
		}
	})
}

// FuzzEvent judges arbitrary event data under every event type and under arbitrary names.
// Invariants: no panic; an unknown type is one violation at PointerEvent; data that is not one
// JSON value is a violation; what passes is JSON.
//
// Seeds: the events of spec/http.md, testdata/fuzz.
func FuzzEvent(f *testing.F) {
	f.Add("status", []byte(status))
	f.Add("message", []byte(accepted))
	f.Add("delta", []byte(`{"turn":2,"text":"he"}`))
	f.Add("closed", []byte(`{}`))
	f.Add("reconnect", []byte(`{"reason":"lifetime"}`))
	f.Add("error", []byte(`{"error":"internal","errorId":"e1"}`))
	f.Add("bogus", []byte(`{}`))
	f.Add("partial", []byte(`{"turn":1,"text":"a"} {"x":1}`))
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		v := fuzzValidator(t)
		vs := v.Event(event, data)
		if !v.events[event] {
			if len(vs) != 1 || vs[0].Pointer != PointerEvent {
				t.Fatalf("unknown event %q judged %v", event, vs)
			}
			return
		}
		if len(vs) == 0 && !json.Valid(data) {
			t.Fatalf("%s data %q is not JSON and passes", event, data)
		}
	})
}

func fuzzValidator(t *testing.T) *Validator {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}
