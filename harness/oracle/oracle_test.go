package oracle

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type envelopeVectors struct {
	Signing []struct {
		Name         string          `json:"name"`
		KeyBase64    string          `json:"keyBase64"`
		Envelope     json.RawMessage `json:"envelope"`
		Canonical    string          `json:"canonical"`
		CanonicalHex string          `json:"canonicalHex"`
		Sig          string          `json:"sig"`
	} `json:"signing"`
	TurnExecutionIDs []struct {
		KeyBase64       string `json:"keyBase64"`
		ConversationID  string `json:"conversationId"`
		Ord             int64  `json:"ord"`
		TurnExecutionID string `json:"turnExecutionId"`
	} `json:"turnExecutionIds"`
	SenderKeys []struct {
		Tenant, Actor, OnBehalfOf, MessageID, SenderKey string
	} `json:"senderKeys"`
	Check struct {
		KeysBase64     []string `json:"keysBase64"`
		ConversationID string   `json:"conversationId"`
		Voices         []struct {
			Tenant, Actor, OnBehalfOf string
		} `json:"voices"`
		Capacity int `json:"capacity"`
		Vectors  []struct {
			Name      string          `json:"name"`
			Raw       *string         `json:"raw"`
			RawBase64 string          `json:"rawBase64"`
			Now       int64           `json:"now"`
			MaxAgeMs  int64           `json:"maxAgeMs"`
			MaxSkewMs int64           `json:"maxSkewMs"`
			Seen      json.RawMessage `json:"seen"`
			Reason    string          `json:"reason"`
		} `json:"vectors"`
	} `json:"check"`
	ReplaySets []struct {
		Name     string              `json:"name"`
		Capacity int                 `json:"capacity"`
		Adds     [][]json.RawMessage `json:"adds"`
		Added    []bool              `json:"added"`
		Floor    int64               `json:"floor"`
		Held     []string            `json:"held"`
		Carry    string              `json:"carry"`
	} `json:"replaySets"`
	Carries []struct {
		Name     string   `json:"name"`
		Carry    string   `json:"carry"`
		Capacity int      `json:"capacity"`
		OK       bool     `json:"ok"`
		Floor    int64    `json:"floor"`
		Held     []string `json:"held"`
	} `json:"carries"`
}

func load(t *testing.T, v any, path ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "fixtures"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSigningVectors(t *testing.T) {
	var f envelopeVectors
	load(t, &f, "envelopes", "vectors.json")
	if len(f.Signing) == 0 {
		t.Fatal("no signing vectors")
	}
	for _, v := range f.Signing {
		t.Run(v.Name, func(t *testing.T) {
			key := b64(t, v.KeyBase64)
			e, err := Parse(v.Envelope)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := string(Canonical(e)); got != v.Canonical {
				t.Errorf("Canonical:\n got %q\nwant %q", got, v.Canonical)
			}
			if got := hex.EncodeToString(Canonical(e)); got != v.CanonicalHex {
				t.Errorf("canonical hex: got %s, want %s", got, v.CanonicalHex)
			}
			if got := Signature(key, e); got != v.Sig || e.Sig != v.Sig {
				t.Errorf("Signature: got %s (envelope says %s), want %s", got, e.Sig, v.Sig)
			}
			if err := Verify([][]byte{key}, e); err != nil {
				t.Errorf("Verify: %v", err)
			}
			// The wire form the kit writes parses back to the same envelope and still verifies.
			back, err := Parse(e.Wire())
			if err != nil || !reflect.DeepEqual(back, e) {
				t.Errorf("Wire round trip: %v, %+v vs %+v", err, back, e)
			}
		})
	}
}

func TestTurnExecutionIDAndSenderKeyVectors(t *testing.T) {
	var f envelopeVectors
	load(t, &f, "envelopes", "vectors.json")
	if len(f.TurnExecutionIDs) == 0 || len(f.SenderKeys) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.TurnExecutionIDs {
		if got := TurnExecutionID(b64(t, v.KeyBase64), v.ConversationID, v.Ord); got != v.TurnExecutionID {
			t.Errorf("TurnExecutionID(%s, %d) = %s, want %s", v.ConversationID, v.Ord, got, v.TurnExecutionID)
		}
	}
	for _, v := range f.SenderKeys {
		got := SenderKey(v.Tenant, v.Actor, v.OnBehalfOf, v.MessageID)
		if got != v.SenderKey || !validID(got) {
			t.Errorf("SenderKey(%q,%q,%q,%q) = %s, want %s", v.Tenant, v.Actor, v.OnBehalfOf, v.MessageID, got, v.SenderKey)
		}
	}
}

func TestCheckVectors(t *testing.T) {
	var f envelopeVectors
	load(t, &f, "envelopes", "vectors.json")
	cv := f.Check
	var keys [][]byte
	for _, k := range cv.KeysBase64 {
		keys = append(keys, b64(t, k))
	}
	voices := func(id Identity) bool {
		for _, v := range cv.Voices {
			if (Identity{v.Tenant, v.Actor, v.OnBehalfOf}) == id {
				return true
			}
		}
		return false
	}
	reasons := map[string]int{}
	for _, v := range cv.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			raw := []byte(nil)
			switch {
			case v.RawBase64 != "":
				raw = b64(t, v.RawBase64)
			case v.Raw != nil:
				raw = []byte(*v.Raw)
			default:
				t.Fatal("a vector without raw")
			}
			seen := NewReplaySet(cv.Capacity)
			if len(v.Seen) > 0 {
				var err error
				if seen, err = ReadReplaySet(v.Seen, cv.Capacity); err != nil {
					t.Fatalf("seen: %v", err)
				}
			}
			before := seen.Carry()
			got := Check(CheckInput{Raw: raw, Keys: keys, ConversationID: cv.ConversationID, Voices: voices,
				Now: v.Now, MaxAgeMs: v.MaxAgeMs, MaxSkewMs: v.MaxSkewMs, Seen: seen})
			if got != v.Reason {
				t.Errorf("Check = %q, want %q", got, v.Reason)
			}
			if !bytes.Equal(before, seen.Carry()) {
				t.Error("Check changed the replay set")
			}
		})
		reasons[v.Reason]++
	}
	for _, r := range []string{"", ReasonMalformed, ReasonUnauthenticated, ReasonReplayed, ReasonStale} {
		if reasons[r] == 0 {
			t.Errorf("no check vector with reason %q", r)
		}
	}
}

func TestReplaySetAndCarryVectors(t *testing.T) {
	var f envelopeVectors
	load(t, &f, "envelopes", "vectors.json")
	for _, v := range f.ReplaySets {
		t.Run(v.Name, func(t *testing.T) {
			s := NewReplaySet(v.Capacity)
			var added []bool
			for _, a := range v.Adds {
				var id string
				var iat int64
				if len(a) != 2 || json.Unmarshal(a[0], &id) != nil || json.Unmarshal(a[1], &iat) != nil {
					t.Fatalf("bad add %s", a)
				}
				added = append(added, s.Add(id, iat))
			}
			if !reflect.DeepEqual(added, v.Added) || s.Floor() != v.Floor || !reflect.DeepEqual(s.Held(), v.Held) {
				t.Errorf("got added %v floor %d held %v, want %v %d %v", added, s.Floor(), s.Held(), v.Added, v.Floor, v.Held)
			}
			if string(s.Carry()) != v.Carry {
				t.Errorf("Carry:\n got %s\nwant %s", s.Carry(), v.Carry)
			}
		})
	}
	for _, v := range f.Carries {
		t.Run("carry/"+v.Name, func(t *testing.T) {
			s, err := ReadReplaySet([]byte(v.Carry), v.Capacity)
			if (err == nil) != v.OK {
				t.Fatalf("ReadReplaySet error %v, want ok=%v", err, v.OK)
			}
			if !v.OK {
				return
			}
			if s.Floor() != v.Floor || !reflect.DeepEqual(s.Held(), v.Held) {
				t.Errorf("got floor %d held %v, want %d %v", s.Floor(), s.Held(), v.Floor, v.Held)
			}
		})
	}
}

func TestTokenVectors(t *testing.T) {
	var counts struct {
		Vectors []struct {
			Name, Text, BytesBase64 string
			ASCII                   int `json:"ascii"`
			Other, Tokens           int
		}
	}
	load(t, &counts, "tokens", "vectors.json")
	for _, v := range counts.Vectors {
		text := v.Text
		if v.BytesBase64 != "" {
			text = string(b64(t, v.BytesBase64))
		}
		a, o := Units(text)
		if a != v.ASCII || o != v.Other || Tokens(text) != v.Tokens {
			t.Errorf("%s: got %d ascii %d other %d tokens, want %d %d %d", v.Name, a, o, Tokens(text), v.ASCII, v.Other, v.Tokens)
		}
	}
	var trims struct {
		Vectors []struct {
			Name, Summary, SummaryBase64, Result, ResultBase64 string
			MaxTokens                                          int
		}
	}
	load(t, &trims, "tokens", "trim-vectors.json")
	for _, v := range trims.Vectors {
		in, want := v.Summary, v.Result
		if v.SummaryBase64 != "" {
			in = string(b64(t, v.SummaryBase64))
		}
		if v.ResultBase64 != "" {
			want = string(b64(t, v.ResultBase64))
		}
		if got := TrimSummary(in, v.MaxTokens); got != want {
			t.Errorf("%s: TrimSummary = %q, want %q", v.Name, got, want)
		}
	}
	var fits struct {
		Vectors []struct {
			Name       string
			PerMessage int
			Input      FitInput
			Output     FitResult
		}
	}
	load(t, &fits, "tokens", "fit-vectors.json")
	for _, v := range fits.Vectors {
		if got := (Counter{PerMessage: v.PerMessage}).Fit(v.Input); !reflect.DeepEqual(got, v.Output) {
			t.Errorf("%s: Fit = %+v, want %+v", v.Name, got, v.Output)
		}
	}
	if len(counts.Vectors) == 0 || len(trims.Vectors) == 0 || len(fits.Vectors) == 0 {
		t.Fatal("missing token vectors")
	}
}

// Every signed field changes the signature: the oracle's canonical form forgets none of them.
func TestEverySignedFieldIsCovered(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	one, three := int64(1), int64(3)
	base := Envelope{ConversationID: "c1", Kind: KindUser, ID: "m1", IAT: 1000, Text: "hello",
		Asker: Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bot"}, EditOf: &one}
	sig := Signature(key, base)
	for name, change := range map[string]func(*Envelope){
		"conversation": func(e *Envelope) { e.ConversationID = "c2" },
		"kind":         func(e *Envelope) { e.Kind = KindClose },
		"id":           func(e *Envelope) { e.ID = "m2" },
		"iat":          func(e *Envelope) { e.IAT++ },
		"text":         func(e *Envelope) { e.Text += "!" },
		"tenant":       func(e *Envelope) { e.Asker.Tenant = "" },
		"actor":        func(e *Envelope) { e.Asker.Actor = "bob" },
		"onBehalfOf":   func(e *Envelope) { e.Asker.OnBehalfOf = "" },
		"editOf":       func(e *Envelope) { e.EditOf = &three },
		"no editOf":    func(e *Envelope) { e.EditOf = nil },
	} {
		e := base
		change(&e)
		e.Sig = sig
		if Verify([][]byte{key}, e) == nil {
			t.Errorf("a change of %s after signing still verifies", name)
		}
	}
	e := base
	e.Sig = MAC(key, Body(base))
	if Verify([][]byte{key}, e) == nil {
		t.Error("a MAC without the domain verifies")
	}
	e.Sig = sig[:42]
	if Verify([][]byte{key}, e) == nil {
		t.Error("a truncated MAC verifies")
	}
	e.Sig = ""
	if Verify([][]byte{key}, e) == nil {
		t.Error("an empty MAC verifies")
	}
	if Verify([][]byte{nil}, Sign(nil, base)) == nil {
		t.Error("an empty key verifies")
	}
}

// The examples spec/envelopes.md gives in its own text.
func TestSpecExamples(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	e := Envelope{ConversationID: "conv-1", Kind: KindUser, ID: "msg-0001", IAT: 1767225599000, Text: "Hello, world!",
		Asker: Identity{Actor: "alice"}}
	want := "loom/conversation/envelope/v1\x00" + `{"asker":{"actor":"alice"},"conversationId":"conv-1","iat":1767225599000,"id":"msg-0001","kind":"user","text":"Hello, world!"}`
	if got := string(Canonical(e)); got != want {
		t.Errorf("Canonical = %q", got)
	}
	if got := Signature(key, e); got != "xL5a2ioWAoOaPMCZYzTyk8Qmsy5HAg905MYwstw13e0" {
		t.Errorf("Signature = %s", got)
	}
	if got := TurnExecutionID(key, "conv-1", 1); got != "turn:conv-1:o1:8349779601b6628f150ce111" {
		t.Errorf("TurnExecutionID = %s", got)
	}
	if got := SenderKey("", "alice", "", "msg-1"); got != "561b5acf7e73dc62c74939f5f72013100f696d13c0ce87769b596ae9d1fcec3e" {
		t.Errorf("SenderKey = %s", got)
	}
}
