package sutclient

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

// strictEvent is one event as the HTML standard (9.2.6) dispatches it, with ID the value of the
// event's own last valid id field ("" when it has none), the per-event view the kit keeps.
type strictEvent struct {
	Event, Data, ID string
}

// strictSSE interprets an event stream by the HTML standard, independently of ReadSSE: UTF-8
// with U+FFFD for bad bytes, a leading BOM dropped, lines ended by CRLF, LF or CR, one leading
// space of a value removed, an id holding NUL ignored, an event without a data line not
// dispatched, an unterminated last event discarded.
func strictSSE(b []byte) []strictEvent {
	s := strings.TrimPrefix(strings.ToValidUTF8(string(b), "\uFFFD"), "\uFEFF")
	var out []strictEvent
	var cur strictEvent
	var data []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return out
		}
		line := s[:i]
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
		if line == "" {
			if data != nil {
				cur.Data = strings.Join(data, "\n")
				if cur.Event == "" {
					cur.Event = "message"
				}
				out = append(out, cur)
			}
			cur, data = strictEvent{}, nil
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Event = value
		case "data":
			data = append(data, value)
		case "id":
			if !strings.Contains(value, "\x00") {
				cur.ID = value
			}
		}
	}
}

// FuzzReadSSE feeds an arbitrary byte stream, as a hostile or careless system might send it,
// to the kit's event-stream reader, delivered whole or one byte at a time. Invariants: no panic;
// the events it reads are exactly those the HTML standard's interpretation gives (so a system
// using CR line ends is read as a browser reads it, and an event a browser would not dispatch is
// not judged); stopping early stops at once; a read error is returned, never swallowed.
//
// Seeds: the streams the reference writes, the line-break and field forms of the standard,
// testdata/fuzz.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"retry: 1000\n\nevent: status\ndata: {\"id\":\"c1\"}\n\nid: 0.1\nevent: message\ndata: {\"ord\":1}\n\n: keep-alive\n\n",
		"event: delta\r\ndata: {\"turn\":1,\"text\":\"a\"}\r\n\r\n",
		"event: delta\rdata: {}\r\r",
		"data: one\ndata: two\n\n",
		"event: closed\n\n",
		"\ufeffdata: x\n\n",
		"id: 1\x002\ndata: x\n\n",
		"data\n\ndata:\n\ndata:  spaced\n\n",
		"event: message\ndata: unterminated",
		"\xff\xfedata: \xff\n\n",
		"field without colon\nid\ndata: x\n\n",
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, raw []byte, mode uint8) {
		want := strictSSE(raw)
		var got []strictEvent
		stopAt := -1
		if mode&1 == 1 && len(want) > 0 {
			stopAt = int(mode>>1) % len(want)
		}
		r := bytes.NewReader(raw)
		var err error
		collect := func(ev Event) bool {
			got = append(got, strictEvent{Event: ev.Event, Data: ev.Data, ID: ev.ID})
			return len(got)-1 != stopAt
		}
		if mode&2 == 2 {
			err = ReadSSE(iotest.OneByteReader(r), collect)
		} else {
			err = ReadSSE(r, collect)
		}
		if err != nil {
			t.Fatalf("ReadSSE of %q: %v", raw, err)
		}
		if stopAt >= 0 {
			want = want[:stopAt+1]
		}
		if len(got) != len(want) {
			t.Fatalf("%q: read %d events, the standard gives %d:\n got %q\nwant %q", raw, len(got), len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%q: event %d read as %q, the standard gives %q", raw, i, got[i], want[i])
			}
		}
		// A failing reader's error comes back.
		boom := errors.New("boom")
		if err := ReadSSE(iotest.ErrReader(boom), func(Event) bool { return true }); !errors.Is(err, boom) {
			t.Fatalf("read error %v, want boom", err)
		}
	})
}
