package envelope

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addOp is one [id, iat] pair of a replay-set vector.
type addOp struct {
	ID  string
	IAT int64
}

func (a *addOp) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return errors.New("add is not a pair")
	}
	if err := json.Unmarshal(pair[0], &a.ID); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &a.IAT)
}

type checkVector struct {
	Name      string          `json:"name"`
	Raw       *string         `json:"raw"`
	RawBase64 string          `json:"rawBase64"`
	Now       int64           `json:"now"`
	MaxAgeMs  int64           `json:"maxAgeMs"`
	MaxSkewMs int64           `json:"maxSkewMs"`
	Seen      json.RawMessage `json:"seen"`
	Reason    string          `json:"reason"`
}

type vectorFile struct {
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
		Tenant     string `json:"tenant"`
		Actor      string `json:"actor"`
		OnBehalfOf string `json:"onBehalfOf"`
		MessageID  string `json:"messageId"`
		SenderKey  string `json:"senderKey"`
	} `json:"senderKeys"`
	Check struct {
		KeysBase64     []string      `json:"keysBase64"`
		ConversationID string        `json:"conversationId"`
		Voices         []Identity    `json:"voices"`
		Capacity       int           `json:"capacity"`
		Vectors        []checkVector `json:"vectors"`
	} `json:"check"`
	ReplaySets []struct {
		Name     string   `json:"name"`
		Capacity int      `json:"capacity"`
		Adds     []addOp  `json:"adds"`
		Added    []bool   `json:"added"`
		Floor    int64    `json:"floor"`
		Held     []string `json:"held"`
		Carry    string   `json:"carry"`
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

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "envelopes", "vectors.json"))
	require.NoError(t, err)
	var f vectorFile
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

func key(t *testing.T, s string) []byte {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return k
}

// held lists the ids of a set, oldest first.
func held(s *ReplaySet) []string {
	ids := []string{}
	for _, e := range s.queue {
		ids = append(ids, e.id)
	}
	return ids
}

func TestSigningVectors(t *testing.T) {
	f := loadVectors(t)
	require.NotEmpty(t, f.Signing)
	for _, v := range f.Signing {
		t.Run(v.Name, func(t *testing.T) {
			k := key(t, v.KeyBase64)
			e, err := Parse(v.Envelope)
			require.NoError(t, err)
			c := Canonical(e)
			assert.Equal(t, v.Canonical, string(c))
			assert.Equal(t, v.CanonicalHex, hex.EncodeToString(c))
			assert.Equal(t, v.Sig, Signature(k, e))
			assert.Equal(t, v.Sig, e.Sig)
			assert.Equal(t, e, Sign(k, e))
			assert.NoError(t, Verify([][]byte{k}, e))
			assert.NoError(t, Validate(e))
			// The Go wire form round-trips through the strict parser.
			raw, err := json.Marshal(e)
			require.NoError(t, err)
			back, err := Parse(raw)
			require.NoError(t, err)
			assert.Equal(t, e, back)
		})
	}
}

func TestTurnExecutionIDVectors(t *testing.T) {
	f := loadVectors(t)
	require.NotEmpty(t, f.TurnExecutionIDs)
	for _, v := range f.TurnExecutionIDs {
		assert.Equal(t, v.TurnExecutionID, TurnExecutionID(key(t, v.KeyBase64), v.ConversationID, v.Ord))
	}
}

func TestSenderKeyVectors(t *testing.T) {
	f := loadVectors(t)
	require.NotEmpty(t, f.SenderKeys)
	for _, v := range f.SenderKeys {
		got := SenderKey(v.Tenant, v.Actor, v.OnBehalfOf, v.MessageID)
		assert.Equal(t, v.SenderKey, got)
		assert.True(t, ValidID(got))
	}
}

func TestCheckVectors(t *testing.T) {
	f := loadVectors(t)
	cv := f.Check
	require.NotEmpty(t, cv.Vectors)
	var keys [][]byte
	for _, k := range cv.KeysBase64 {
		keys = append(keys, key(t, k))
	}
	voices := func(id Identity) bool {
		for _, v := range cv.Voices {
			if v == id {
				return true
			}
		}
		return false
	}
	reasons := map[string]bool{}
	for _, v := range cv.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			var raw []byte
			if v.RawBase64 != "" {
				raw = key(t, v.RawBase64)
			} else {
				require.NotNil(t, v.Raw)
				raw = []byte(*v.Raw)
			}
			seen := NewReplaySet(cv.Capacity)
			if len(v.Seen) > 0 {
				require.NoError(t, json.Unmarshal(v.Seen, seen))
			}
			before, err := json.Marshal(seen)
			require.NoError(t, err)
			got := Check(CheckInput{Raw: raw, Keys: keys, ConversationID: cv.ConversationID,
				Voices: voices, Now: v.Now, MaxAgeMs: v.MaxAgeMs, MaxSkewMs: v.MaxSkewMs, Seen: seen})
			assert.Equal(t, v.Reason, got.Reason)
			assert.Equal(t, v.Reason == "", got.OK)
			assert.Equal(t, v.Reason == "" || v.Reason == ReasonReplayed || v.Reason == ReasonStale, got.Authentic)
			if v.Reason == ReasonMalformed {
				assert.Equal(t, Envelope{}, got.Envelope)
			}
			after, err := json.Marshal(seen)
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "Check must not modify the replay set")
		})
		reasons[v.Reason] = true
	}
	for _, r := range []string{"", ReasonMalformed, ReasonUnauthenticated, ReasonReplayed, ReasonStale} {
		assert.True(t, reasons[r], "no vector for reason %q", r)
	}
}

func TestReplaySetVectors(t *testing.T) {
	f := loadVectors(t)
	require.NotEmpty(t, f.ReplaySets)
	for _, v := range f.ReplaySets {
		t.Run(v.Name, func(t *testing.T) {
			s := NewReplaySet(v.Capacity)
			var added []bool
			for _, a := range v.Adds {
				added = append(added, s.Add(a.ID, a.IAT))
			}
			assert.Equal(t, v.Added, added)
			assert.Equal(t, v.Floor, s.Floor())
			assert.Equal(t, v.Held, held(s))
			out, err := json.Marshal(s)
			require.NoError(t, err)
			assert.Equal(t, v.Carry, string(out))
			back, err := ParseReplaySet(out, v.Capacity)
			require.NoError(t, err)
			assert.Equal(t, v.Floor, back.Floor())
			assert.Equal(t, v.Held, held(back))
		})
	}
}

func TestCarryVectors(t *testing.T) {
	f := loadVectors(t)
	require.NotEmpty(t, f.Carries)
	for _, v := range f.Carries {
		t.Run(v.Name, func(t *testing.T) {
			s, err := ParseReplaySet([]byte(v.Carry), v.Capacity)
			if !v.OK {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrInvalidCarry)
				var ce *CarryError
				assert.ErrorAs(t, err, &ce)
				assert.Nil(t, s)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, v.Floor, s.Floor())
			assert.Equal(t, v.Held, held(s))
		})
	}
}
