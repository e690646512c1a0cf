package envelope

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	current  = bytes.Repeat([]byte{0x11}, 32)
	previous = bytes.Repeat([]byte{0x22}, 32)
	owner    = Identity{Tenant: "acme", Actor: "alice"}
)

const now = int64(1_767_225_600_000)

func sample() Envelope {
	edit := int64(2)
	return Envelope{ConversationID: "conv-1", Kind: KindUser, ID: "msg-1", IAT: now - 10,
		Text: "hello", Asker: Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bot"}, EditOf: &edit}
}

func isOwner(id Identity) bool { return id == owner }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestTamperingAnyFieldBreaksTheSignature(t *testing.T) {
	signed := Sign(current, sample())
	require.NoError(t, Verify([][]byte{current}, signed))
	tampers := map[string]func(e *Envelope){
		"conversationId":   func(e *Envelope) { e.ConversationID = "conv-2" },
		"kind":             func(e *Envelope) { e.Kind = KindClose },
		"id":               func(e *Envelope) { e.ID = "msg-2" },
		"iat":              func(e *Envelope) { e.IAT++ },
		"text":             func(e *Envelope) { e.Text = "hellO" },
		"text-appended":    func(e *Envelope) { e.Text += " " },
		"asker.tenant":     func(e *Envelope) { e.Asker.Tenant = "" },
		"asker.actor":      func(e *Envelope) { e.Asker.Actor = "mallory" },
		"asker.onBehalfOf": func(e *Envelope) { e.Asker.OnBehalfOf = "other" },
		"editOf-changed":   func(e *Envelope) { n := *e.EditOf + 1; e.EditOf = &n },
		"editOf-removed":   func(e *Envelope) { e.EditOf = nil },
		"sig":              func(e *Envelope) { e.Sig = strings.ToUpper(e.Sig) },
		"sig-truncated":    func(e *Envelope) { e.Sig = e.Sig[:42] },
		"sig-padded":       func(e *Envelope) { e.Sig += "=" },
		"sig-newline":      func(e *Envelope) { e.Sig = e.Sig[:20] + "\n" + e.Sig[20:] },
	}
	for name, tamper := range tampers {
		t.Run(name, func(t *testing.T) {
			e := signed
			edit := *signed.EditOf
			e.EditOf = &edit
			tamper(&e)
			assert.ErrorIs(t, Verify([][]byte{current, previous}, e), ErrUnauthenticated)
			v := Check(CheckInput{Raw: mustJSON(t, e), Keys: [][]byte{current, previous},
				ConversationID: "conv-1", Voices: func(Identity) bool { return true }, Now: now})
			if v.Reason != ReasonMalformed { // a tamper may also break a field rule
				assert.Equal(t, ReasonUnauthenticated, v.Reason)
			}
			assert.False(t, v.OK)
		})
	}
}

func TestKeyRotation(t *testing.T) {
	old := Sign(previous, sample())
	assert.NoError(t, Verify([][]byte{current, previous}, old), "previous key still verifies")
	assert.ErrorIs(t, Verify([][]byte{current}, old), ErrUnauthenticated, "dropped key no longer verifies")
	fresh := Sign(current, sample())
	assert.NoError(t, Verify([][]byte{current, previous}, fresh))
	assert.NotEqual(t, old.Sig, fresh.Sig)
	assert.ErrorIs(t, Verify(nil, fresh), ErrUnauthenticated)
	assert.ErrorIs(t, Verify([][]byte{{}}, Sign(nil, sample())), ErrUnauthenticated, "an empty key never verifies")
}

func TestVerifyRefusesInvalidUTF8(t *testing.T) {
	e := sample()
	e.Text = "a\xffb"
	e = Sign(current, e)
	assert.ErrorIs(t, Verify([][]byte{current}, e), ErrUnauthenticated)
	// Canonical writes U+FFFD for the bad byte.
	assert.Contains(t, string(Canonical(e)), `"text":"a`+"\uFFFD"+`b"`)
}

func TestCheckOwnerAndShared(t *testing.T) {
	e := sample()
	e.Asker = owner
	raw := mustJSON(t, Sign(current, e))
	in := CheckInput{Raw: raw, Keys: [][]byte{current}, ConversationID: "conv-1", Voices: isOwner, Now: now}
	v := Check(in)
	require.True(t, v.OK)
	assert.True(t, v.Authentic)
	assert.Equal(t, "", v.Reason)
	assert.Equal(t, e.Text, v.Envelope.Text)

	in.Voices = nil
	assert.Equal(t, ReasonUnauthenticated, Check(in).Reason, "nil Voices admits nobody")

	participants := map[Identity]bool{owner: true, {Actor: "bob"}: true}
	in.Voices = func(id Identity) bool { return participants[id] }
	assert.True(t, Check(in).OK)
	delete(participants, owner)
	assert.Equal(t, ReasonUnauthenticated, Check(in).Reason)
}

func TestCheckDoesNotConsume(t *testing.T) {
	e := sample()
	e.Asker = owner
	raw := mustJSON(t, Sign(current, e))
	seen := NewReplaySet(4)
	in := CheckInput{Raw: raw, Keys: [][]byte{current}, ConversationID: "conv-1", Voices: isOwner, Now: now, Seen: seen}
	require.True(t, Check(in).OK)
	require.True(t, Check(in).OK, "checking twice without Add accepts twice")
	v := Check(in)
	require.True(t, seen.Add(v.Envelope.ID, v.Envelope.IAT))
	assert.Equal(t, ReasonReplayed, Check(in).Reason)
}

func TestEvictionRaisesFloorAndFloodNeverReopens(t *testing.T) {
	seen := NewReplaySet(8)
	victim := sample()
	victim.Asker = owner
	victim.ID = "victim"
	victim.IAT = now - 5_000
	raw := mustJSON(t, Sign(current, victim))
	in := CheckInput{Raw: raw, Keys: [][]byte{current}, ConversationID: "conv-1", Voices: isOwner, Now: now, Seen: seen}
	require.True(t, Check(in).OK)
	require.True(t, seen.Add("victim", victim.IAT))
	assert.Equal(t, ReasonReplayed, Check(in).Reason)

	// Flood with ids issued both before and after the victim.
	var floors []int64
	for i := 0; i < 100; i++ {
		iat := now - 10_000 + int64(i*37%200)
		if i%3 == 0 {
			iat = now - 4_000 + int64(i)
		}
		seen.Add("flood-"+strconv.Itoa(i), iat)
		floors = append(floors, seen.Floor())
		assert.LessOrEqual(t, seen.Len(), 8)
		v := Check(in)
		assert.False(t, v.OK, "the victim is never accepted again (step %d)", i)
		assert.Contains(t, []string{ReasonReplayed, ReasonStale}, v.Reason)
	}
	assert.False(t, seen.Contains("victim"))
	assert.GreaterOrEqual(t, seen.Floor(), victim.IAT)
	for i := 1; i < len(floors); i++ {
		assert.GreaterOrEqual(t, floors[i], floors[i-1], "the floor never lowers")
	}
	// Round-tripping the carry keeps the protection.
	carry := mustJSON(t, seen)
	restored, err := ParseReplaySet(carry, 8)
	require.NoError(t, err)
	in.Seen = restored
	assert.Equal(t, ReasonStale, Check(in).Reason)
}

func TestReplaySetZeroAndNil(t *testing.T) {
	var nilSet *ReplaySet
	assert.False(t, nilSet.Contains("a"))
	assert.Equal(t, int64(0), nilSet.Floor())
	assert.Equal(t, 0, nilSet.Len())
	assert.Equal(t, DefaultReplayCapacity, nilSet.Capacity())

	var s ReplaySet
	assert.True(t, s.Add("a", 1))
	assert.False(t, s.Add("a", 2), "duplicate")
	assert.False(t, s.Add("", 2), "invalid id")
	assert.False(t, s.Add(strings.Repeat("x", MaxIDBytes+1), 2), "invalid id")
	assert.Equal(t, DefaultReplayCapacity, s.Capacity())
	for i := 0; i < DefaultReplayCapacity; i++ {
		s.Add("id-"+strconv.Itoa(i), int64(i+10))
	}
	assert.Equal(t, DefaultReplayCapacity, s.Len())
	assert.False(t, s.Contains("a"))
	assert.Equal(t, int64(1), s.Floor(), "a (iat 1) was evicted")
	s.Add("one-more", 3)
	assert.Equal(t, int64(10), s.Floor(), "then id-0 (iat 10)")
	out, err := json.Marshal(&s)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), `{"floor":10,"seen":[["id-1",11],`))
}

func TestUntrustedCarry(t *testing.T) {
	type carrier struct {
		Seen *ReplaySet `json:"seen"`
	}
	var c carrier
	err := json.Unmarshal([]byte(`{"seen":{"floor":0,"seen":[["a",1],["a",2]]}}`), &c)
	var ce *CarryError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrInvalidCarry)

	// On error the receiver is unchanged.
	s := NewReplaySet(4)
	s.Add("keep", 5)
	assert.Error(t, s.UnmarshalJSON([]byte(`{"floor":"x","seen":[]}`)))
	assert.True(t, s.Contains("keep"))
	assert.NoError(t, s.UnmarshalJSON([]byte(`null`)))
	assert.True(t, s.Contains("keep"))

	// A huge carry is bounded by the receiver's capacity, and the floor covers what was dropped.
	var b strings.Builder
	b.WriteString(`{"floor":0,"seen":[`)
	for i := 0; i < 10_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`["e` + strconv.Itoa(i) + `",` + strconv.Itoa(1000+i) + `]`)
	}
	b.WriteString(`]}`)
	require.NoError(t, s.UnmarshalJSON([]byte(b.String())))
	assert.Equal(t, 4, s.Len())
	assert.Equal(t, 4, s.Capacity())
	assert.Equal(t, int64(1000+9995), s.Floor())
	assert.True(t, s.Contains("e9999"))
	assert.False(t, s.Contains("keep"))

	for _, bad := range []string{"", "{", `{"floor":0,"seen":[]`, "\xff", `{"floor":0,"seen":[["a",1]],"seen":[]}`} {
		_, err := ParseReplaySet([]byte(bad), 4)
		assert.ErrorIs(t, err, ErrInvalidCarry, "%q", bad)
	}
}

func TestValidateAndParseErrors(t *testing.T) {
	e := sample()
	require.NoError(t, Validate(e))
	cases := map[string]func(e *Envelope){
		"conversationId":   func(e *Envelope) { e.ConversationID = "" },
		"kind":             func(e *Envelope) { e.Kind = "system" },
		"id":               func(e *Envelope) { e.ID = "a\tb" },
		"iat":              func(e *Envelope) { e.IAT = -1 },
		"text":             func(e *Envelope) { e.Text = "\xff" },
		"asker.actor":      func(e *Envelope) { e.Asker.Actor = "" },
		"asker.tenant":     func(e *Envelope) { e.Asker.Tenant = "\xc0" },
		"asker.onBehalfOf": func(e *Envelope) { e.Asker.OnBehalfOf = "\xed\xa0\x80" },
		"editOf":           func(e *Envelope) { z := int64(0); e.EditOf = &z },
	}
	for field, breakIt := range cases {
		x := sample()
		breakIt(&x)
		err := Validate(x)
		var me *MalformedError
		require.ErrorAs(t, err, &me, field)
		assert.Equal(t, field, me.Field)
		assert.ErrorIs(t, err, ErrMalformed)
	}
	closeEnv := sample()
	closeEnv.Kind = KindClose
	assert.ErrorIs(t, Validate(closeEnv), ErrMalformed, "editOf on a close")
	closeEnv.EditOf = nil
	assert.NoError(t, Validate(closeEnv), "a close may carry text")
	closeEnv.Text = ""
	assert.NoError(t, Validate(closeEnv))

	for id, ok := range map[string]bool{"conv-1": true, "A": true, "a.b_c-d": true, "": false, "-a": false,
		"a b": false, "é": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false} {
		assert.Equal(t, ok, ValidConversationID(id), "%q", id)
	}

	_, err := Parse([]byte(`{"conversationId":"c"`))
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = Parse([]byte(`{"conversationId":"c","kind":"user","id":"i","iat":1,"text":"","asker":{"actor":"a"},"sig":"s","bogus":1}`))
	var me *MalformedError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "bogus", me.Field)
}

func TestTurnExecutionID(t *testing.T) {
	a := TurnExecutionID(current, "conv-1", 7)
	assert.Equal(t, a, TurnExecutionID(current, "conv-1", 7))
	assert.NotEqual(t, a, TurnExecutionID(previous, "conv-1", 7))
	assert.NotEqual(t, a, TurnExecutionID(current, "conv-1", 8))
	require.True(t, strings.HasPrefix(a, "turn:conv-1:o7:"))
	assert.Len(t, strings.TrimPrefix(a, "turn:conv-1:o7:"), 24)
}

func TestStaleArithmeticDoesNotOverflow(t *testing.T) {
	e := sample()
	e.Asker = owner
	e.IAT = MaxSafeInteger
	raw := mustJSON(t, Sign(current, e))
	in := CheckInput{Raw: raw, Keys: [][]byte{current}, ConversationID: "conv-1", Voices: isOwner,
		Now: 0, MaxSkewMs: 1<<63 - 1}
	assert.True(t, Check(in).OK)
	in.Now = -1 << 63 // the distance exceeds even the largest skew
	assert.Equal(t, ReasonStale, Check(in).Reason)
	in.MaxSkewMs = 0
	assert.Equal(t, ReasonStale, Check(in).Reason)
	in.Now = 1<<63 - 1
	in.MaxAgeMs = 1
	assert.Equal(t, ReasonStale, Check(in).Reason)
	in.MaxAgeMs = 1<<63 - 1
	assert.True(t, Check(in).OK)
}

// TestReplaySetBack: Back counts from the newest id held, follows evictions, and answers false
// past the oldest, below zero and on a nil set.
func TestReplaySetBack(t *testing.T) {
	var nilSet *ReplaySet
	_, ok := nilSet.Back(0)
	assert.False(t, ok)
	s := NewReplaySet(3)
	_, ok = s.Back(0)
	assert.False(t, ok, "empty")
	for _, id := range []string{"a", "b", "c", "d"} {
		s.Add(id, 1)
	}
	for i, want := range []string{"d", "c", "b"} {
		got, ok := s.Back(i)
		require.True(t, ok, i)
		assert.Equal(t, want, got, i)
	}
	for _, i := range []int{3, -1} {
		got, ok := s.Back(i)
		assert.False(t, ok, i)
		assert.Empty(t, got, i)
	}
}
