package gateway_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/schemas"
)

// The fuzz targets of this file drive the real handler of an engine opened once per fuzz worker
// on a temporary directory. Every input gets a conversation of its own, so what one input does
// cannot change what another sees.

var (
	fuzzAlice   = loomtype.Identity{Tenant: "t1", Actor: "alice"}
	fuzzBob     = loomtype.Identity{Tenant: "t1", Actor: "bob"}
	fuzzService = loomtype.Identity{Tenant: "host", Actor: "service"}
)

type fuzzEngine struct {
	eng *reftest.Engine
	h   http.Handler
	cv  *conversation.Conversations
	db  *sql.DB
	cv2 *contract.Validator
	// internal collects the real errors behind 500s.
	internal chan string
	// reuse holds a conversation no request has changed yet, owner (false) and shared (true).
	reuse map[bool]string
}

func openFuzzEngine(f testing.TB) *fuzzEngine {
	f.Helper()
	fe := &fuzzEngine{internal: make(chan string, 16), reuse: map[bool]string{}}
	eng := reftest.Open(f, reftest.Tokens(map[string]loomtype.Identity{"alice": fuzzAlice, "bob": fuzzBob}), reftest.Shared(fuzzService),
		reftest.Conversation(func(c *conversation.Config) { c.Keys = [][]byte{bytes.Repeat([]byte{0x42}, 32)} }),
		reftest.With(func(o *reference.Options) {
			o.Gateway.PostsPerMinute, o.Gateway.RuntimeDoor = 1<<30, true
			o.Gateway.OnError = func(id string, err error) {
				select {
				case fe.internal <- id + ": " + err.Error():
				default:
				}
			}
			o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
	db, err := sql.Open("sqlite", "file:"+filepath.Join(eng.Dir, "loom.db")+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		f.Fatal(err)
	}
	v, err := contract.New()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() }) // before the engine's close, which the rig registered first
	fe.eng, fe.h, fe.cv, fe.db, fe.cv2 = eng, eng.Handler(), eng.Conversations(), db, v
	return fe
}

// conversation starts a fresh conversation owned by alice; shared ones have bob as participant.
func (fe *fuzzEngine) conversation(t *testing.T, shared bool) string {
	t.Helper()
	opt := conversation.StartOptions{}
	if shared {
		opt = conversation.StartOptions{Mode: conversation.ModeShared, Participants: []loomtype.Identity{fuzzBob}}
	}
	st, _, err := fe.cv.Start(context.Background(), fuzzAlice, opt)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return st.ID
}

// footprint is everything a request on conversation id may write: its whole transcript as the
// owner reads it, its inbox and participant streams, its dedupe keys, the executions started
// by callers (turn executions the engine starts itself are left out, and so are the records of
// the global namespace: a POST takes from its caller's allowance whatever its outcome) and the
// execution at extra, when given.
func (fe *fuzzEngine) footprint(t *testing.T, id, extra string) string {
	t.Helper()
	var hist []byte
	if id != "" {
		page, err := fe.cv.History(context.Background(), fuzzAlice, id, conversation.HistoryOptions{Limit: 500})
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		hist, _ = json.Marshal(page)
	}
	var inbox, parts, execs, remembered, extraExec int64
	var rememberedN int64
	row := fe.db.QueryRow(`SELECT
		(SELECT count(*) FROM events WHERE stream = ?),
		(SELECT count(*) FROM events WHERE stream = ?),
		(SELECT count(*) FROM meta WHERE key NOT LIKE 'exec/turn:%' AND key NOT LIKE 'global/%'),
		(SELECT count(*) FROM remembered WHERE scope = ?),
		(SELECT coalesce(sum(n), 0) FROM remembered WHERE scope = ?),
		(SELECT count(*) FROM meta WHERE key = ?)`,
		"in/"+id, "participants/"+id, "dd/"+id, "dd/"+id, "exec/"+extra)
	if err := row.Scan(&inbox, &parts, &execs, &remembered, &rememberedN, &extraExec); err != nil {
		t.Fatalf("footprint: %v", err)
	}
	return fmt.Sprintf("history=%s inbox=%d participants=%d executions=%d remembered=%d/%d extra=%d",
		hist, inbox, parts, execs, remembered, rememberedN, extraExec)
}

// errorCodes are the codes of spec/http.md by status.
var errorCodes = map[int][]string{
	400: {"bad request", "invalid cursor", "invalid id"},
	401: {"unauthenticated"},
	403: {"forbidden origin", "forbidden host", "delegation refused"},
	404: {"not found"},
	409: {"conflict"},
	413: {"payload too large"},
	415: {"unsupported media type"},
	429: {"too many requests"},
}

// checkError judges an error answer: a documented status with its code, the body valid against
// schemas/error.schema.json, and the uniform 404 byte for byte. It returns the code.
func checkError(t *testing.T, status int, header http.Header, body []byte) string {
	t.Helper()
	if status >= 500 {
		t.Fatalf("status %d for a bad request: %s", status, body)
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
	if err := schemas.Validate("error", body); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(errorCodes[status], e.Error) {
		t.Fatalf("status %d with code %q", status, e.Error)
	}
	if status == 404 && string(body) != `{"error":"not found"}` {
		t.Fatalf("404 body %q is not the uniform one", body)
	}
	return e.Error
}

// The POST routes the fuzzer drives. conv says the path names the input's conversation; shared
// that it is a shared one.
var fuzzRoutes = []struct {
	path   string
	conv   bool
	shared bool
}{
	{"/conversations", false, false},
	{"/conversations/{id}/turns", true, false},
	{"/conversations/{id}/turns", true, true},
	{"/conversations/{id}/close", true, false},
	{"/conversations/{id}/participants", true, true},
	{"/runtime/executions", false, false},
	{"/runtime/executions/{id}/messages", true, false},
	{"/conversations/{id}/close", true, true},
}

var fuzzContentTypes = []string{"application/json", "application/json; charset=utf-8", "", "text/plain",
	"application/x-www-form-urlencoded", "APPLICATION/JSON", "application/json; charset", "multipart/form-data; boundary=x"}

// FuzzRequestBody sends an arbitrary body, with one of a few content types, as alice, as bob or
// with no credential, to every POST route of the surface. Invariants: no panic and no 5xx; every answer keeps the
// contract of spec/openapi.yaml (status, headers, body schema); an error answer is the typed
// JSON of schemas/error.schema.json with the code its status documents; and a refused request
// writes nothing (the footprint of the conversation is what it was).
//
// Seeds: request bodies the feature files send, plus testdata/fuzz.
func FuzzRequestBody(f *testing.F) {
	seeds := []struct {
		route uint8
		body  string
	}{
		{0, `{}`}, {0, ``}, {0, `{"id":"conv-1"}`}, {0, `{"mode":"shared","participants":[{"actor":"bob","tenant":"t1"}]}`},
		{0, `{"mode":"owner","participants":[{"actor":"bob"}]}`}, {0, `{"id":"bad id"}`}, {0, `{"mode":"other"}`},
		{1, `{"text":"hello"}`}, {1, `{"text":"hello","messageId":"m-1"}`}, {1, `{"text":"again","editOf":1}`},
		{1, `{"text":""}`}, {1, `{"text":"x","editOf":0}`}, {1, `{"text":"x","editOf":"1"}`}, {1, `{"messageId":"m"}`},
		{1, `{"text":"x","extra":1}`}, {1, `{"text":"x"} {}`}, {1, `{"text":"x","editOf":1.5}`},
		{1, `{"text":"x","messageId":"` + strings.Repeat("m", 129) + `"}`}, {1, `{"text":null}`}, {1, `[]`},
		{2, `{"text":"shared turn"}`}, {3, ``}, {3, `{}`}, {3, `{"messageId":"close-1"}`}, {3, `{"x":1}`},
		{4, `{"op":"add","identity":{"actor":"carol","tenant":"t1"}}`}, {4, `{"op":"remove","identity":{"actor":"bob","tenant":"t1"}}`},
		{4, `{"op":"rename","identity":{"actor":"carol"}}`}, {4, `{"op":"add","identity":{}}`},
		{5, `{"id":"exec-1","flow":"conversation.turn","input":{}}`}, {5, `{"id":"exec-2","flow":"other","input":1}`},
		{5, `{"id":"","flow":"","input":null}`},
		{6, `{"messageId":"raw-1","payload":{"conversationId":"c","kind":"user","id":"i","iat":1,"text":"t","asker":{"actor":"a"},"sig":"s"}}`},
		{6, `{"messageId":"raw-2"}`}, {7, `{}`},
		{1, `{"TEXT":"hi"}`}, {1, `{"text":"a","Text":"b"}`}, {0, `{"ID":"upper"}`}, {4, `{"OP":"add","identity":{"Actor":"carol"}}`},
		{1, `{"text":"x","editOf":9007199254740993}`},
	}
	for i, s := range seeds {
		f.Add(s.route, uint8(i%2), uint8(0), []byte(s.body))
	}
	f.Add(uint8(1), uint8(0), uint8(3), []byte(`{"text":"plain"}`))
	f.Add(uint8(1), uint8(0), uint8(2), []byte(`{"text":"no type"}`))
	fe := openFuzzEngine(f)
	f.Fuzz(func(t *testing.T, route, who, ctype uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		// A refused request leaves its conversation as it was, so the conversation serves the
		// next input of the route too; one that was accepted gets a fresh one.
		id := ""
		if rt.conv {
			if id = fe.reuse[rt.shared]; id == "" {
				id = fe.conversation(t, rt.shared)
			}
			delete(fe.reuse, rt.shared)
		}
		extra := ""
		if rt.path == "/runtime/executions" {
			var b struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(body, &b)
			extra = b.ID
		}
		before := ""
		if id != "" || extra != "" {
			before = fe.footprint(t, id, extra)
		}
		path := strings.ReplaceAll(rt.path, "{id}", id)
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		switch who % 3 {
		case 0:
			req.Header.Set("Authorization", "Bearer alice")
		case 1:
			req.Header.Set("Authorization", "Bearer bob")
		} // 2: no credential
		if ct := fuzzContentTypes[int(ctype)%len(fuzzContentTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		fe.h.ServeHTTP(rec, req)
		res := rec.Result()
		got := rec.Body.Bytes()
		select {
		case msg := <-fe.internal:
			t.Fatalf("internal error behind a %d: %s", res.StatusCode, msg)
		default:
		}
		if res.StatusCode >= 500 {
			t.Fatalf("%s %q: status %d: %s", path, body, res.StatusCode, got)
		}
		creq := httptest.NewRequest(http.MethodPost, path, nil)
		creq.Header = req.Header.Clone()
		if vs := fe.cv2.Response(creq, body, res.StatusCode, res.Header, got); len(vs) > 0 {
			t.Fatalf("%s %q: answer %d %s breaks the contract: %v", path, body, res.StatusCode, got, vs)
		}
		if res.StatusCode < 400 {
			// What is accepted must be inside the contract: a body the request schema refuses
			// (an unknown member, a wrong type, a member written in another case) is a 400.
			var outside []contract.Violation
			for _, v := range fe.cv2.Request(creq, body) {
				if !strings.HasPrefix(v.Pointer, contract.PointerHeaderPrefix) {
					outside = append(outside, v)
				}
			}
			if len(outside) > 0 && len(body) > 0 {
				t.Fatalf("%s %q is outside the contract (%v) but was accepted: %d %s", path, body, outside, res.StatusCode, got)
			}
			return
		}
		checkError(t, res.StatusCode, res.Header, got)
		if id != "" {
			fe.reuse[rt.shared] = id
		}
		if before != "" {
			if after := fe.footprint(t, id, extra); after != before {
				t.Fatalf("%s %q was refused with %d %s but wrote:\nbefore %s\nafter  %s", path, body, res.StatusCode, got, before, after)
			}
		}
	})
}

// TestBodyMembersExact holds the inputs FuzzRequestBody found accepted outside the contract:
// encoding/json matches member names in any case and keeps the last of two equal members, where
// the contract names each member exactly, once.
func TestBodyMembersExact(t *testing.T) {
	fe := openFuzzEngine(t)
	id := fe.conversation(t, false)
	shared := fe.conversation(t, true)
	for _, c := range []struct{ path, body, field string }{
		{"/conversations/" + id + "/turns", `{"TEXT":"hi"}`, "TEXT"},
		{"/conversations/" + id + "/turns", `{"text":"a","Text":"b"}`, "Text"},
		{"/conversations/" + id + "/turns", `{"text":"a","text":"b"}`, "text"},
		{"/conversations/" + id + "/turns", `{"text":"a","messageID":"m1"}`, "messageID"},
		{"/conversations", `{"ID":"upper"}`, "ID"},
		{"/conversations", `{"mode":"shared","participants":[{"actor":"bob","Tenant":"t1"}]}`, "participants.Tenant"},
		{"/conversations/" + shared + "/participants", `{"op":"add","identity":{"actor":"carol","actor":"dave"}}`, "identity.actor"},
		{"/runtime/executions", `{"id":"x1","flow":"conversation.turn","input":{},"Input":1}`, "Input"},
		{"/conversations/" + id + "/turns", `{"text":"a","messageId":null}`, "messageId"},
		{"/conversations/" + id + "/turns", `{"text":"a","messageId":""}`, "messageId"},
		{"/conversations/" + id + "/turns", `{"text":"a","editOf":null}`, "editOf"},
		{"/conversations/" + id + "/close", `{"messageId":""}`, "messageId"},
		{"/conversations/" + id + "/close", `{"messageId":"close-1"}`, "messageId"},
		{"/conversations", `{"mode":""}`, "mode"},
		{"/conversations", `{"participants":null}`, "participants"},
		{"/conversations", `null`, "body"},
		{"/conversations", `{} }`, "body"},
		{"/conversations", `{}]`, "body"},
		{"/conversations/" + id + "/turns", `{"text":"a"} {}`, "body"},
		{"/conversations/" + id + "/turns", "{\"text\":\"a\xff\"}", "text"},
		{"/conversations/" + id + "/turns", `{"text":"a\ud800"}`, "text"},
		{"/conversations/" + id + "/turns", `{"text":"a\udc00"}`, "text"},
		{"/conversations/" + id + "/turns", `{"messageId":"m-9"}`, "text"},
		{"/runtime/executions", `{"id":"x3","flow":"conversation.turn","input":{"a":2,"a":3}}`, "input.a"},
		{"/runtime/executions/" + id + "/messages", `{"messageId":"m-9","payload":{"kind":"user","kind":"close"}}`, "payload.kind"},
	} {
		before := fe.footprint(t, id, "upper")
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fe.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || rec.Body.String() != `{"detail":"`+c.field+`","error":"bad request"}` {
			t.Errorf("%s %s: %d %s, want 400 naming %q", c.path, c.body, rec.Code, rec.Body, c.field)
		}
		if after := fe.footprint(t, id, "upper"); after != before {
			t.Errorf("%s %s wrote:\n%s\n%s", c.path, c.body, before, after)
		}
	}
	// A free-form input is taken as it is: members differing only in case are two members.
	req := httptest.NewRequest(http.MethodPost, "/runtime/executions", strings.NewReader(`{"id":"turn:`+id+`:x2","flow":"conversation.turn","input":{"conversationId":"`+id+`","A":1,"a":2}}`))
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	fe.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Errorf("runtime start with a free-form input: %d %s", rec.Code, rec.Body)
	}
}

// FuzzCursor reads a conversation's history, its event stream and the runtime log of its
// execution with an arbitrary cursor. Invariants: no panic, no 5xx; a cursor ParseCursor refuses
// is 400 "invalid cursor" on every route (never a read from the start); a cursor it accepts is
// answered with exactly the entries after it, taken from a cursorless read of the whole history,
// and each returned cursor parses back to itself.
//
// Seeds: cursors of the features (0.0, 0.7, 3.41, past the end), malformed ones, testdata/fuzz.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"0.0", "0.1", "0.3", "3.41", "0.999999999999999999", "1.0", "", ".", "0.", ".0", "-1.0",
		"0.-1", "0x1.0", "1e3.0", "0.0.0", " 0.0", "0.0 ", "00.01", "9999999999999999999.0", "abc", "0,0", "٣.٣", "+1.0"} {
		f.Add(s, uint8(0))
	}
	fe := openFuzzEngine(f)
	// One conversation with a few records, the same for every input: reads never write.
	id := ""
	f.Fuzz(func(t *testing.T, cursor string, mode uint8) {
		if id == "" {
			id = fe.conversation(t, false)
			for i := range 3 {
				if _, err := fe.cv.SendTurn(context.Background(), fuzzAlice, id, fmt.Sprintf("turn %d", i), conversation.SendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fe.cv.Close(context.Background(), fuzzAlice, id, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := fe.eng.Kernel().Await(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}
		want, perr := loomtype.ParseCursor(cursor)
		if (perr == nil) != cursorGrammar.MatchString(cursor) {
			t.Fatalf("ParseCursor(%q) = %v, %v; the grammar says %v", cursor, want, perr, cursorGrammar.MatchString(cursor))
		}
		if perr != nil {
			var ce *loomtype.CursorError
			if !errors.As(perr, &ce) || !errors.Is(perr, loomtype.ErrInvalidCursor) || ce.Cursor != cursor || want != (loomtype.Cursor{}) {
				t.Fatalf("ParseCursor(%q) refused with %T %v and %v", cursor, perr, perr, want)
			}
		} else if back, err := loomtype.ParseCursor(want.String()); err != nil || back != want || want.Gen < 0 || want.Seq < 0 {
			t.Fatalf("cursor %q parsed as %v does not round-trip: %v, %v", cursor, want, back, err)
		}
		q := url.Values{"cursor": {cursor}}
		var paths []string
		switch mode % 3 {
		case 0:
			paths = []string{"/conversations/" + id + "/history?" + q.Encode()}
		case 1:
			paths = []string{"/runtime/executions/" + id + "/log?" + q.Encode()}
		case 2:
			paths = []string{"/conversations/" + id + "/events?" + q.Encode(), "/conversations/" + id + "/events"}
		}
		for i, path := range paths {
			if i == 1 && (cursor == "" || strings.ContainsAny(cursor, "\r\n\x00") || cursor != strings.TrimSpace(cursor)) {
				continue // not a header value that survives the wire unchanged
			}
			guard := 10 * time.Second
			if perr == nil && mode%3 == 2 && len(after(t, allEntries(t, fe, id), want)) == 0 {
				// Nothing to replay after the close: the stream waits, so it is cut short.
				guard = 20 * time.Millisecond
			}
			lastID := ""
			if i == 1 {
				lastID = cursor
			}
			res, body := fe.get(path, lastID, guard)
			if perr != nil {
				if cursor == "" {
					continue // no cursor at all: from the start, by definition
				}
				if res.StatusCode != http.StatusBadRequest || checkError(t, res.StatusCode, res.Header, body) != "invalid cursor" {
					t.Fatalf("%s with a malformed cursor: %d %s", path, res.StatusCode, body)
				}
				continue
			}
			if res.StatusCode != http.StatusOK {
				msg := ""
				select {
				case msg = <-fe.internal:
				default:
				}
				t.Fatalf("%s with cursor %q: %d %s %s", path, cursor, res.StatusCode, body, msg)
			}
			switch mode % 3 {
			case 0:
				checkHistoryAfter(t, fe, id, want, body)
			case 1:
				checkRawLogAfter(t, want, body)
			case 2:
				checkEventsAfter(t, fe, id, want, body)
			}
		}
	})
}

// get answers GET path as alice, with Last-Event-ID when lastID is set, cut off after guard.
func (fe *fuzzEngine) get(path, lastID string, guard time.Duration) (*http.Response, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer alice")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	rec := httptest.NewRecorder()
	fe.h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.Bytes()
}

// cursorGrammar is the cursor of spec/http.md, written independently of ParseCursor.
var cursorGrammar = regexp.MustCompile(`^[0-9]{1,18}\.[0-9]{1,18}$`)

// allEntries reads the whole history without a cursor.
func allEntries(t *testing.T, fe *fuzzEngine, id string) []loomtype.Entry {
	t.Helper()
	page, err := fe.cv.History(context.Background(), fuzzAlice, id, conversation.HistoryOptions{Limit: 500})
	if err != nil || !page.Done {
		t.Fatalf("history: %v (done %v)", err, page.Done)
	}
	return page.Entries
}

func after(t *testing.T, all []loomtype.Entry, c loomtype.Cursor) []loomtype.Entry {
	t.Helper()
	out := []loomtype.Entry{}
	for _, e := range all {
		ec, err := loomtype.ParseCursor(e.Cursor)
		if err != nil || ec.String() != e.Cursor {
			t.Fatalf("entry cursor %q does not round-trip", e.Cursor)
		}
		if c.Less(ec) {
			out = append(out, e)
		}
	}
	return out
}

func checkHistoryAfter(t *testing.T, fe *fuzzEngine, id string, c loomtype.Cursor, body []byte) {
	t.Helper()
	var page loomtype.Page
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	want := after(t, allEntries(t, fe, id), c)
	if page.Entries == nil {
		page.Entries = []loomtype.Entry{}
	}
	gotJ, _ := json.Marshal(page.Entries)
	wantJ, _ := json.Marshal(want)
	if !bytes.Equal(gotJ, wantJ) {
		t.Fatalf("history after %v:\n got %s\nwant %s", c, gotJ, wantJ)
	}
	if nc, err := loomtype.ParseCursor(page.NextCursor); err != nil || nc.String() != page.NextCursor {
		t.Fatalf("nextCursor %q does not round-trip", page.NextCursor)
	}
}

func checkRawLogAfter(t *testing.T, c loomtype.Cursor, body []byte) {
	t.Helper()
	var log struct {
		Events []struct {
			Cursor string `json:"cursor"`
		} `json:"events"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(body, &log); err != nil {
		t.Fatal(err)
	}
	for _, e := range log.Events {
		ec, err := loomtype.ParseCursor(e.Cursor)
		if err != nil || ec.String() != e.Cursor || !c.Less(ec) {
			t.Fatalf("runtime log after %v holds cursor %q", c, e.Cursor)
		}
	}
	if nc, err := loomtype.ParseCursor(log.NextCursor); err != nil || nc.String() != log.NextCursor {
		t.Fatalf("nextCursor %q does not round-trip", log.NextCursor)
	}
}

// checkEventsAfter compares the message events of a stream (of a closed conversation, so it
// ends) with the entries after the cursor. A cursor at or past the close record has nothing to
// replay and the stream would wait: those are sent with a short deadline instead.
func checkEventsAfter(t *testing.T, fe *fuzzEngine, id string, c loomtype.Cursor, body []byte) {
	t.Helper()
	want := after(t, allEntries(t, fe, id), c)
	var got []string
	for _, block := range strings.Split(string(body), "\n\n") {
		if strings.Contains(block, "event: message\n") {
			for _, line := range strings.Split(block, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					var e loomtype.Entry
					if err := json.Unmarshal([]byte(d), &e); err != nil {
						t.Fatal(err)
					}
					got = append(got, e.Cursor)
				}
			}
		}
	}
	var wantC []string
	for _, e := range want {
		wantC = append(wantC, e.Cursor)
	}
	if !slices.Equal(got, wantC) {
		t.Fatalf("events after %v: got %v, want %v", c, got, wantC)
	}
}

// TestEventsClientGone holds what FuzzCursor found under load: a client whose request ended
// before its stream began was answered (to nobody) with a 500, and the error hook received an
// internal error that was only the client leaving.
func TestEventsClientGone(t *testing.T) {
	fe := openFuzzEngine(t)
	id := fe.conversation(t, false)
	for _, path := range []string{"/conversations/" + id + "/events", "/conversations/" + id + "/events?cursor=1.0"} {
		res, body := fe.get(path, "", 0) // the request has ended before it is served
		if len(body) != 0 || res.StatusCode != http.StatusOK {
			t.Errorf("%s for a client that left: %d %q, want nothing written", path, res.StatusCode, body)
		}
		select {
		case msg := <-fe.internal:
			t.Errorf("%s: the error hook got %s", path, msg)
		default:
		}
	}
}
