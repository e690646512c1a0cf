package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validRaws are wire forms that Parse accepts, chosen to pass through every reader path: escapes
// of each kind, a surrogate pair, whitespace, an editOf and a full asker.
var validRaws = []string{
	`{"conversationId":"conv-1","kind":"user","id":"m\u0031","iat":1767225599000,"text":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00z","asker":{"tenant":"acme","actor":"alice","onBehalfOf":"bot"},"editOf":12,"sig":"s"}`,
	" {\n\t\"conversationId\" : \"c\" , \"kind\" : \"close\" , \"id\" : \"i\" , \"iat\" : 0 , \"asker\" : { \"actor\" : \"a\" } , \"sig\" : \"\" } \r\n",
}

// TestParseEveryPrefixIsMalformed: no proper prefix of a valid payload is an envelope, and Parse
// refuses each with a *MalformedError (never a panic, never an envelope).
func TestParseEveryPrefixIsMalformed(t *testing.T) {
	for _, raw := range validRaws {
		_, err := Parse([]byte(raw))
		require.NoError(t, err, raw)
		end := len(strings.TrimRight(raw, " \t\r\n"))
		for n := 0; n < end; n++ {
			e, err := Parse([]byte(raw[:n]))
			var me *MalformedError
			if !assert.ErrorAs(t, err, &me, "prefix %q", raw[:n]) {
				return
			}
			assert.Equal(t, Envelope{}, e)
		}
	}
}

// TestParseReplaySetEveryPrefixIsRefused: likewise for a replay carry.
func TestParseReplaySetEveryPrefixIsRefused(t *testing.T) {
	raw := ` {"floor" : 7, "seen" : [ ["a\u0062\/",1] , ["c",9007199254740991] ] } `
	s, err := ParseReplaySet([]byte(raw), 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"ab/", "c"}, held(s))
	for n := 0; n < len(strings.TrimRight(raw, " ")); n++ {
		s, err := ParseReplaySet([]byte(raw[:n]), 4)
		var ce *CarryError
		if !assert.ErrorAs(t, err, &ce, "prefix %q", raw[:n]) {
			return
		}
		assert.Nil(t, s)
	}
}

// TestParseErrorFieldAndOffset: a refusal names the member being read and the byte offset where
// reading stopped.
func TestParseErrorFieldAndOffset(t *testing.T) {
	const head = `{"conversationId":"conv-1","kind":"user","id":"m1","iat":5,`
	const tail = `"asker":{"actor":"a"},"sig":"s"}`
	cases := []struct {
		raw    string
		field  string
		offset int
	}{
		{`{}`, "conversationId", 2},
		{`[]`, "", 0},
		{``, "", 0},
		{head + `"text":"t",` + `"asker":{},"sig":"s"}`, "asker.actor", len(head + `"text":"t","asker":{},"sig":"s"}`)},
		{head + `"text":"t",` + `"asker":{"actor":"a","actor":"b"},"sig":"s"}`, "asker.actor", len(head + `"text":"t","asker":{"actor":"a","actor":`)},
		{head + `"text":"t",` + `"asker":{"actor":"a","x":1},"sig":"s"}`, "asker.x", len(head + `"text":"t","asker":{"actor":"a","x":`)},
		{head + `"text":"t","kind":"close",` + tail, "kind", len(head + `"text":"t","kind":`)},
		{head + `"text":"t","extra":1,` + tail, "extra", len(head + `"text":"t","extra":`)},
		{head + `"text":"t",` + tail + ` x`, "", len(head + `"text":"t",` + tail + ` `)},
		{head + tail, "text", len(head + tail)},
		{head + `"text":"t",` + `"asker":{"actor":"a"}}`, "sig", len(head + `"text":"t","asker":{"actor":"a"}}`)},
		// Where a value stops being readable.
		{head + `"text":"a\u00g0",` + tail, "text", len(head + `"text":"a\u`)},
		{head + `"text":"a\u0041`, "text", len(head + `"text":"a\u0041`)},
		{head + `"text":"a\u004`, "text", len(head + `"text":"a\u`)},
		{head + `"text":"a\ud83d\u0041",` + tail, "text", len(head + `"text":"a\ud83d\u0041`)},
		{head + `"text":"a\ud83dx",` + tail, "text", len(head + `"text":"a\ud83d`)},
		{head + `"text":"a\ud83d\u`, "text", len(head + `"text":"a\ud83d\u`)},
		{head + `"text":"a\ud83d\u0`, "text", len(head + `"text":"a\ud83d\u`)},
		{head + `"text":"a\q",` + tail, "text", len(head + `"text":"a\q`)},
		{head + `"text":"a\`, "text", len(head + `"text":"a\`)},
		{head + `"text":"a`, "text", len(head + `"text":"a`)},
		{head + `"text":"a` + "\x01" + `b",` + tail, "text", len(head + `"text":"a`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":-5,`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":1.5,`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":1`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":1e3,`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":1`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":01,`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":01`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":12345678901234567,`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":1234567890123456`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":10000000000000000}`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":1000000000000000`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":9007199254740992}`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":9007199254740992`)},
		{`{"conversationId":"c","kind":"user","id":"m1","iat":}`, "iat", len(`{"conversationId":"c","kind":"user","id":"m1","iat":`)},
		{`{"conversationId" "c"}`, "", len(`{"conversationId" `)},
		{`{"conversationId":"c",}`, "", len(`{"conversationId":"c",`)},
		{"{\"text\":\"\xff\"}", "", 0},
	}
	for _, c := range cases {
		e, err := Parse([]byte(c.raw))
		var me *MalformedError
		if !assert.ErrorAs(t, err, &me, "%q", c.raw) {
			continue
		}
		assert.ErrorIs(t, err, ErrMalformed)
		assert.Equal(t, c.field, me.Field, "field of %q", c.raw)
		assert.Equal(t, c.offset, me.Offset, "offset of %q", c.raw)
		assert.Equal(t, Envelope{}, e)
	}
}

// TestCarryErrorOffset: a refused carry says where reading stopped.
func TestCarryErrorOffset(t *testing.T) {
	for raw, offset := range map[string]int{
		`{"floor":-1,"seen":[]}`:                       len(`{"floor":`),
		`{"floor":1.5,"seen":[]}`:                      len(`{"floor":1`),
		`{"floor":12345678901234567,"seen":[]}`:        len(`{"floor":1234567890123456`),
		`{"floor":0,"seen":[["a",-1]]}`:                len(`{"floor":0,"seen":[["a",`),
		`{"floor":0,"seen":[["a\q",1]]}`:               len(`{"floor":0,"seen":[["a\q`),
		`{"floor":0,"seen":[["a",1],["a",2]]}`:         len(`{"floor":0,"seen":[["a",1],["a",2]`),
		`{"floor":0,"seen":[["a",1],["a",2],["b",3]]}`: len(`{"floor":0,"seen":[["a",1],["a",2]`),
		`{"floor":0,"seen":[[1,1],["b",3]]}`:           len(`{"floor":0,"seen":[[`),
		`{"floor":0,"seen":[],"x":1}`:                  len(`{"floor":0,"seen":[],"x":`),
		`{"floor":0}`:                                  len(`{"floor":0}`),
		`{"floor":0,"seen":[]} x`:                      len(`{"floor":0,"seen":[]} `),
		"{\"floor\":0,\"seen\":[[\"\xff\",1]]}":        0,
	} {
		_, err := ParseReplaySet([]byte(raw), 4)
		var ce *CarryError
		if assert.ErrorAs(t, err, &ce, raw) {
			assert.Equal(t, offset, ce.Offset, raw)
			assert.Equal(t, "envelope: invalid replay carry at offset "+strconv.Itoa(offset), err.Error())
		}
	}
}

// TestMalformedErrorMessage: the message names the field, or the payload when there is none.
func TestMalformedErrorMessage(t *testing.T) {
	assert.Equal(t, "envelope: malformed field asker.actor", (&MalformedError{Field: "asker.actor"}).Error())
	assert.Equal(t, "envelope: malformed payload", (&MalformedError{Offset: 3}).Error())
	assert.True(t, errors.Is(&MalformedError{}, ErrMalformed))
}

// TestCanonicalOfLongFields: each signed string at a length far above the rest is written whole;
// the buffer's initial size is only a hint.
func TestCanonicalOfLongFields(t *testing.T) {
	long := strings.Repeat("x", 1000)
	edit := int64(MaxSafeInteger)
	for _, c := range []struct {
		name string
		e    Envelope
		body string
	}{
		{"empty", Envelope{}, `{"asker":{},"conversationId":"","iat":0,"id":"","kind":"","text":""}`},
		{"conversationId", Envelope{ConversationID: long}, `{"asker":{},"conversationId":"` + long + `","iat":0,"id":"","kind":"","text":""}`},
		{"id", Envelope{ID: long}, `{"asker":{},"conversationId":"","iat":0,"id":"` + long + `","kind":"","text":""}`},
		{"text", Envelope{Text: long}, `{"asker":{},"conversationId":"","iat":0,"id":"","kind":"","text":"` + long + `"}`},
		{"kind", Envelope{Kind: long}, `{"asker":{},"conversationId":"","iat":0,"id":"","kind":"` + long + `","text":""}`},
		{"tenant", Envelope{Asker: Identity{Tenant: long}}, `{"asker":{"tenant":"` + long + `"},"conversationId":"","iat":0,"id":"","kind":"","text":""}`},
		{"actor", Envelope{Asker: Identity{Actor: long}}, `{"asker":{"actor":"` + long + `"},"conversationId":"","iat":0,"id":"","kind":"","text":""}`},
		{"onBehalfOf", Envelope{Asker: Identity{OnBehalfOf: long}}, `{"asker":{"onBehalfOf":"` + long + `"},"conversationId":"","iat":0,"id":"","kind":"","text":""}`},
		{"all", Envelope{ConversationID: "c", Kind: "user", ID: "i", IAT: MaxSafeInteger, Text: long, EditOf: &edit,
			Asker: Identity{Tenant: "t", Actor: "a", OnBehalfOf: "o"}},
			`{"asker":{"actor":"a","onBehalfOf":"o","tenant":"t"},"conversationId":"c","editOf":9007199254740991,"iat":9007199254740991,"id":"i","kind":"user","text":"` + long + `"}`},
	} {
		assert.Equal(t, Domain+"\x00"+c.body, string(Canonical(c.e)), c.name)
	}
}

// TestCanonicalStringBytes: every ASCII byte is escaped or written as RFC 8785 says, and each
// ill-formed byte (a lone continuation byte 0x80 included) becomes U+FFFD while well-formed
// sequences, U+0080 and U+FFFD itself included, are copied.
func TestCanonicalStringBytes(t *testing.T) {
	text := func(s string) string {
		c := string(Canonical(Envelope{Text: s}))
		const pre, post = `"text":`, `}`
		return c[strings.Index(c, pre)+len(pre) : len(c)-len(post)]
	}
	var want strings.Builder
	var all strings.Builder
	for c := 0; c < 0x80; c++ {
		all.WriteByte(byte(c))
		switch c {
		case '"':
			want.WriteString(`\"`)
		case '\\':
			want.WriteString(`\\`)
		case '\b':
			want.WriteString(`\b`)
		case '\t':
			want.WriteString(`\t`)
		case '\n':
			want.WriteString(`\n`)
		case '\f':
			want.WriteString(`\f`)
		case '\r':
			want.WriteString(`\r`)
		default:
			if c < 0x20 {
				want.WriteString(`\u00` + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&0xf]))
			} else {
				want.WriteByte(byte(c))
			}
		}
	}
	assert.Equal(t, `"`+want.String()+`"`, text(all.String()))
	for in, out := range map[string]string{
		"\x80":               "\uFFFD",
		"a\x80b":             "a\uFFFDb",
		"\xbf":               "\uFFFD",
		"\xff\xfe":           "\uFFFD\uFFFD",
		"\xc2":               "\uFFFD",
		"\xe2\x82":           "\uFFFD\uFFFD",
		"\u0080":             "\u0080",
		"\u07ff\u0800":       "\u07ff\u0800",
		"\uFFFD":             "\uFFFD",
		"x\uFFFDy\U0010ffff": "x\uFFFDy\U0010ffff",
		"\xed\xa0\x80":       "\uFFFD\uFFFD\uFFFD",
	} {
		assert.Equal(t, `"`+out+`"`, text(in), "%q", in)
	}
	// SenderKey escapes the same way, and its buffer's initial size is only a hint too.
	long := strings.Repeat("y", 1000)
	for _, args := range [][4]string{{long, "", "", ""}, {"", long, "", ""}, {"", "", long, ""}, {"", "", "", long},
		{"\x80", "a\"", "", "m\n"}} {
		array := "[" + text(args[0]) + "," + text(args[1]) + "," + text(args[2]) + "," + text(args[3]) + "]"
		sum := sha256.Sum256([]byte(array))
		assert.Equal(t, hex.EncodeToString(sum[:]), SenderKey(args[0], args[1], args[2], args[3]), array)
	}
}

// TestVerifyRefusesInvalidUTF8InEachField: an ill-formed string in any one signed field, all the
// others well-formed, never verifies, even signed with the right key.
func TestVerifyRefusesInvalidUTF8InEachField(t *testing.T) {
	for name, breakIt := range map[string]func(e *Envelope){
		"conversationId":   func(e *Envelope) { e.ConversationID = "c\x80" },
		"kind":             func(e *Envelope) { e.Kind = "user\xff" },
		"id":               func(e *Envelope) { e.ID = "\xc0id" },
		"text":             func(e *Envelope) { e.Text = "t\xed\xa0\x80" },
		"asker.tenant":     func(e *Envelope) { e.Asker.Tenant = "\xe2\x82" },
		"asker.actor":      func(e *Envelope) { e.Asker.Actor = "a\x80" },
		"asker.onBehalfOf": func(e *Envelope) { e.Asker.OnBehalfOf = "\xff" },
	} {
		e := sample()
		require.NoError(t, Verify([][]byte{current}, Sign(current, e)))
		breakIt(&e)
		assert.ErrorIs(t, Verify([][]byte{current}, Sign(current, e)), ErrUnauthenticated, name)
	}
}

// TestValidIdentifiersAtRangeEnds: each end of each character range of a conversation id and an
// envelope id, and the first character outside it.
func TestValidIdentifiersAtRangeEnds(t *testing.T) {
	for id, ok := range map[string]bool{
		"A": true, "Z": true, "a": true, "z": true, "0": true, "9": true, "Zz09": true, "a-": true, "a.": true, "a_": true,
		"@": false, "[": false, "`": false, "{": false, "/": false, ":": false, "a@": false, "a[": false, "a`": false,
		"a{": false, "a/": false, "a:": false, ".a": false, "_a": false, "-a": false, "a,": false, "a+": false, "a~": false,
		strings.Repeat("Z", 128): true, strings.Repeat("9", 129): false, "": false,
	} {
		assert.Equal(t, ok, ValidConversationID(id), "conversation id %q", id)
	}
	for id, ok := range map[string]bool{
		" ": true, "~": true, " x": true, "x~": true, "x": true, strings.Repeat("~", MaxIDBytes): true,
		"\x1f": false, "\x1fx": false, "x\x1f": false, "\x7f": false, "x\x7f": false, "\x7fx": false, "\x80": false,
		"": false, strings.Repeat(" ", MaxIDBytes+1): false,
	} {
		assert.Equal(t, ok, ValidID(id), "id %q", id)
	}
	assert.Equal(t, 128, MaxIDBytes)
	assert.Equal(t, int64(9007199254740991), int64(MaxSafeInteger))
}

// TestValidateIntegerBounds: iat in 0..MaxSafeInteger, editOf in 1..MaxSafeInteger, each end and
// one past it.
func TestValidateIntegerBounds(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		iat   int64
		edit  *int64
		field string
	}{
		{0, nil, ""}, {MaxSafeInteger, nil, ""}, {-1, nil, "iat"}, {MaxSafeInteger + 1, nil, "iat"},
		{1, n(1), ""}, {1, n(MaxSafeInteger), ""}, {1, n(0), "editOf"}, {1, n(MaxSafeInteger + 1), "editOf"},
		{1, n(-1), "editOf"},
	} {
		e := sample()
		e.IAT, e.EditOf = c.iat, c.edit
		err := Validate(e)
		if c.field == "" {
			assert.NoError(t, err, "iat %d editOf %v", c.iat, c.edit)
			continue
		}
		var me *MalformedError
		if assert.ErrorAs(t, err, &me, "iat %d", c.iat) {
			assert.Equal(t, c.field, me.Field)
		}
	}
}

// TestReplaySetCapacities: the default is 1024; any positive capacity, 1 included, is kept; the
// zero set and a non-positive capacity select the default.
func TestReplaySetCapacities(t *testing.T) {
	assert.Equal(t, 1024, DefaultReplayCapacity)
	var zero ReplaySet
	assert.Equal(t, 1024, zero.Capacity())
	for capacity, want := range map[int]int{-1: 1024, 0: 1024, 1: 1, 2: 2} {
		s := NewReplaySet(capacity)
		assert.Equal(t, want, s.Capacity(), "capacity %d", capacity)
	}
	one := NewReplaySet(1)
	assert.True(t, one.Add("a", 3))
	assert.True(t, one.Add("b", 2))
	assert.Equal(t, []string{"b"}, held(one))
	assert.Equal(t, int64(3), one.Floor())
	back, err := ParseReplaySet([]byte(`{"floor":0,"seen":[["a",3],["b",2]]}`), 1)
	require.NoError(t, err)
	assert.Equal(t, 1, back.Capacity())
	assert.Equal(t, []string{"b"}, held(back))
}

// TestEqualIssueTimesAndFloors: evicting an id issued exactly at the floor, or restoring a floor
// equal to the evicted ids' highest issue time, leaves the floor where it is.
func TestEqualIssueTimesAndFloors(t *testing.T) {
	s := NewReplaySet(1)
	s.Add("a", 7)
	s.Add("b", 7)
	s.Add("c", 7)
	assert.Equal(t, int64(7), s.Floor())
	assert.Equal(t, []string{"c"}, held(s))
	back, err := ParseReplaySet([]byte(`{"floor":7,"seen":[["a",7],["b",7]]}`), 1)
	require.NoError(t, err)
	assert.Equal(t, int64(7), back.Floor())
	assert.Equal(t, []string{"b"}, held(back))
}

// TestAgeAndSkewLimits: zero selects the default, a negative value means 0, a positive value is
// used as it is; and an issue time exactly at now is never too old nor too new, whatever the
// limit.
func TestAgeAndSkewLimits(t *testing.T) {
	assert.Equal(t, int64(DefaultMaxAgeMs), limit(0, DefaultMaxAgeMs))
	assert.Equal(t, int64(0), limit(-1, DefaultMaxAgeMs))
	assert.Equal(t, int64(0), limit(-1<<63, DefaultMaxAgeMs))
	assert.Equal(t, int64(1), limit(1, DefaultMaxAgeMs))
	assert.Equal(t, int64(600_000), int64(DefaultMaxAgeMs))
	assert.Equal(t, int64(60_000), int64(DefaultMaxSkewMs))
	for _, d := range []int64{0, 1, 1 << 62} {
		for _, at := range []int64{-1 << 63, -1, 0, 1, 1<<63 - 1} {
			assert.False(t, before(at, at, d), "before(%d, %d, %d)", at, at, d)
		}
	}
	assert.True(t, before(0, 1, 0))
	assert.False(t, before(0, 1, 1))
	assert.True(t, before(-1<<63, 1<<63-1, 1<<63-1))
	assert.False(t, before(1, 0, 0))

	e := sample()
	e.Asker = owner
	raw := mustJSON(t, Sign(current, e))
	for _, c := range []struct {
		maxAge, maxSkew, now int64
		ok                   bool
	}{
		{-1, -1, e.IAT, true}, {-1, -1, e.IAT + 1, false}, {-1, -1, e.IAT - 1, false},
		{1, 1, e.IAT + 1, true}, {1, 1, e.IAT - 1, true}, {1, 1, e.IAT + 2, false}, {1, 1, e.IAT - 2, false},
		{0, 0, e.IAT + DefaultMaxAgeMs, true}, {0, 0, e.IAT + DefaultMaxAgeMs + 1, false},
		{0, 0, e.IAT - DefaultMaxSkewMs, true}, {0, 0, e.IAT - DefaultMaxSkewMs - 1, false},
	} {
		v := Check(CheckInput{Raw: raw, Keys: [][]byte{current}, ConversationID: "conv-1", Voices: isOwner,
			Now: c.now, MaxAgeMs: c.maxAge, MaxSkewMs: c.maxSkew})
		if c.ok {
			assert.True(t, v.OK, "%+v: %s", c, v.Reason)
		} else {
			assert.Equal(t, ReasonStale, v.Reason, "%+v", c)
		}
	}
}
