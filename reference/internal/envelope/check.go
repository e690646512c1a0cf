package envelope

// Reasons a [Verdict] gives for refusing an envelope. They are the wire values of a rejected
// record's reason.
const (
	// ReasonMalformed: the payload is not an envelope ([Parse] fails).
	ReasonMalformed = "malformed"
	// ReasonUnauthenticated: the signature does not verify under any key, the envelope belongs to
	// another conversation, or its asker is not a voice of this conversation.
	ReasonUnauthenticated = "unauthenticated"
	// ReasonReplayed: the envelope's ID was already consumed (it is in the replay set).
	ReasonReplayed = "replayed"
	// ReasonStale: the issue time is at or below the replay floor, older than the maximum age,
	// or further in the future than the allowed skew.
	ReasonStale = "stale"
)

// CheckInput is everything [Check] needs.
//
// Keys are the accepted signing keys, the current one first. Voices says whether an identity may
// speak in this conversation (in owner mode: is it the owner; in shared mode: is it a
// participant); nil admits nobody. Now is the time the payload was received, in Unix
// milliseconds. MaxAgeMs and MaxSkewMs bound how far IAT may lie before and after Now: zero
// selects [DefaultMaxAgeMs] and [DefaultMaxSkewMs], a negative value means 0. Seen is the
// conversation's replay set; nil is an empty set with floor 0. Check never modifies it.
//
//	in := envelope.CheckInput{Raw: payload, Keys: [][]byte{current, previous},
//		ConversationID: id, Voices: isParticipant, Now: receivedMs, MaxAgeMs: cfg.MaxEnvelopeAgeMs,
//		Seen: seen}
type CheckInput struct {
	Raw            []byte
	Keys           [][]byte
	ConversationID string
	Voices         func(Identity) bool
	Now            int64
	MaxAgeMs       int64
	MaxSkewMs      int64
	Seen           *ReplaySet
}

// Verdict is the outcome of [Check]. OK is true when the envelope is accepted; otherwise Reason is
// one of the Reason constants. Envelope is the parsed envelope whenever parsing succeeded (zero
// for [ReasonMalformed]); Authentic is true when its signature, conversation and voice were
// confirmed, that is when OK or Reason is [ReasonReplayed] or [ReasonStale]. Only an authentic
// envelope's fields may be trusted.
//
//	if v := envelope.Check(in); !v.OK {
//		recordRejection(v.Reason) // no text from the payload
//	}
type Verdict struct {
	OK        bool
	Reason    string
	Envelope  Envelope
	Authentic bool
}

// Check applies the acceptance rule of spec/envelopes.md to a received payload. The steps run in
// this order and the first that fails decides the reason:
//
//  1. [Parse] the payload: failure is [ReasonMalformed].
//  2. [Verify] the signature under in.Keys: failure is [ReasonUnauthenticated].
//  3. The envelope's ConversationID must equal in.ConversationID: else [ReasonUnauthenticated].
//  4. in.Voices must admit the asker: else [ReasonUnauthenticated].
//  5. The ID must not be in in.Seen: else [ReasonReplayed].
//  6. IAT must be above in.Seen's floor, at least Now - MaxAgeMs and at most Now + MaxSkewMs:
//     else [ReasonStale].
//
// Check is pure: it does not record the envelope as consumed. After acting on an accepted
// envelope (or recording a rejection of an authentic one) the caller adds it to the replay set
// with Seen.Add(v.Envelope.ID, v.Envelope.IAT) in the same durable step. Check is safe for
// concurrent use as long as nobody modifies Seen meanwhile.
//
//	v := envelope.Check(envelope.CheckInput{Raw: payload, Keys: keys, ConversationID: "c1",
//		Voices: func(a envelope.Identity) bool { return a == owner }, Now: receivedMs, Seen: seen})
func Check(in CheckInput) Verdict {
	e, err := Parse(in.Raw)
	if err != nil {
		return Verdict{Reason: ReasonMalformed}
	}
	v := Verdict{Envelope: e}
	if Verify(in.Keys, e) != nil || e.ConversationID != in.ConversationID ||
		in.Voices == nil || !in.Voices(e.Asker) {
		v.Reason = ReasonUnauthenticated
		return v
	}
	v.Authentic = true
	if in.Seen.Contains(e.ID) {
		v.Reason = ReasonReplayed
		return v
	}
	maxAge := limit(in.MaxAgeMs, DefaultMaxAgeMs)
	maxSkew := limit(in.MaxSkewMs, DefaultMaxSkewMs)
	if e.IAT <= in.Seen.Floor() || before(e.IAT, in.Now, maxAge) || before(in.Now, e.IAT, maxSkew) {
		v.Reason = ReasonStale
		return v
	}
	v.OK = true
	return v
}

func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// before reports whether a < b - d, for d >= 0, without overflow.
func before(a, b, d int64) bool {
	// a < b - d  <=>  b - a > d; compute b - a in a way that cannot wrap.
	if a >= b {
		return false
	}
	diff := uint64(b) - uint64(a) // exact, since a < b
	return diff > uint64(d)
}
