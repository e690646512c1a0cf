package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// sseEvent is one event as an EventSource dispatches it.
type sseEvent struct {
	Type, Data, LastEventID string
}

// parseSSE is the event-stream interpretation of the HTML standard (9.2.6), written here
// independently of the writer and of the kit's reader: UTF-8 decoding with U+FFFD for bad bytes,
// a leading BOM dropped, lines ended by CRLF, LF or CR, one leading space of a value removed, an
// id holding NUL ignored, the last event ID kept across events, an event with no data line not
// dispatched and an unterminated last event discarded. It also returns the retry values seen.
func parseSSE(b []byte) (events []sseEvent, retries []string) {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.TrimPrefix(s, "\uFEFF")
	var data strings.Builder
	var typ, lastID string
	hasData := false
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated line is never dispatched
		}
		line := s[:i]
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
		if line == "" {
			if hasData {
				d := strings.TrimSuffix(data.String(), "\n")
				t := typ
				if t == "" {
					t = "message"
				}
				events = append(events, sseEvent{Type: t, Data: d, LastEventID: lastID})
			}
			data.Reset()
			typ, hasData = "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		case "retry":
			retries = append(retries, value)
		}
	}
	return events, retries
}

// FuzzSSEWriter writes up to three events with arbitrary names, ids and data (a text inside the
// delta shape, or an arbitrary JSON value) and a comment, then parses the bytes back with
// parseSSE. Invariants: no panic; each send either refuses before writing a byte or its event
// reads back exactly, name, data and id; a comment never becomes an event; no retry field is
// ever injected; the stream holds nothing but the events sent.
//
// Seeds: the event names and shapes of spec/http.md, line breaks in every position, testdata/fuzz.
func FuzzSSEWriter(f *testing.F) {
	f.Add("message", "0.7", "hello", []byte(`{"turn":1}`), "keep-alive", uint8(3))
	f.Add("delta", "", "two\nlines\r\nand\rmore", []byte(`{"a":"\n"}`), "", uint8(1))
	f.Add("status\ndata: forged", "1.2\nevent: closed", "x\n\ndata: y", []byte("[1,\n2]"), "a\n\ndata: b\n", uint8(2))
	f.Add("", "0\x001", "\u2028\u2029", []byte(`"\u2028"`), "\r", uint8(0))
	f.Add("reset", " 3.4", "\xff\xfe", []byte(`null`), "retry: 1", uint8(7))
	f.Add("closed", "id", "", []byte(`{}`), ":", uint8(5))
	f.Add("message", "0.1", "t", []byte(`1`), "keep-alive\n\ndata: forged\n", uint8(8))
	f.Add("message", "0.1", "t", []byte(`1`), "keep-alive\rretry: 1", uint8(9))
	f.Fuzz(func(t *testing.T, event, id, text string, raw []byte, comment string, shape uint8) {
		rec := httptest.NewRecorder()
		out := &sse{w: rec, rc: http.NewResponseController(rec)}
		var want []sseEvent
		lastID := ""
		for k := range 3 {
			ev, eid := event, id
			if k == 1 {
				ev, eid = "message", "0.1" // a plain event between the fuzzed ones
			}
			v := stream.ConvEvent{Kind: stream.ConvDelta, Turn: int64(k), Text: text}.Data()
			if shape>>k&1 == 1 {
				v = json.RawMessage(raw)
			}
			before := rec.Body.Len()
			if err := out.send(ev, eid, v); err != nil {
				if rec.Body.Len() != before {
					t.Fatalf("a refused send wrote %q", rec.Body.Bytes()[before:])
				}
				continue
			}
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("send accepted data json.Marshal refuses: %v", err)
			}
			if eid != "" {
				lastID = eid
			}
			typ := ev
			if typ == "" {
				typ = "message"
			}
			want = append(want, sseEvent{Type: typ, Data: string(data), LastEventID: lastID})
			if shape&8 != 0 {
				before := rec.Body.Len()
				if err := out.comment(comment); err != nil && rec.Body.Len() != before {
					t.Fatalf("a refused comment wrote %q", rec.Body.Bytes()[before:])
				}
			}
		}
		b := rec.Body.Bytes()
		if !utf8.Valid(b) {
			t.Fatalf("the stream is not UTF-8: %q", b)
		}
		got, retries := parseSSE(b)
		if len(retries) > 0 {
			t.Fatalf("retry fields %q injected into %q", retries, b)
		}
		if len(got) != len(want) {
			t.Fatalf("%d events read back from %q, %d sent:\n got %q\nwant %q", len(got), b, len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("event %d of %q reads back as %q, sent %q", i, b, got[i], want[i])
			}
		}
		if len(want) > 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
			t.Fatalf("the stream does not end on an event boundary: %q", b)
		}
	})
}
