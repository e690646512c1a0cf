package record

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// EntryOf returns the transcript entry an event holds, if it holds one. A record of version 4
// leaves its text, message id, asker and edited record to the inbox entry ref names (non-nil):
// the caller fills them in (Resolve, Asked.Fill) before the entry goes anywhere.
func EntryOf(ev kernel.LogEvent) (_ loomtype.Entry, ref *InboxRef, _ bool) {
	d := ev.Decision
	if d == nil || len(d.Value) == 0 || d.Value[0] != '{' || !mayHoldRec(d.Value) {
		return loomtype.Entry{}, nil, false
	}
	var rec Stored
	if v, ok := decodeValue(d.Value); ok {
		rec = v.Rec // what the decode below makes of a value json.Marshal wrote, in one pass
	} else {
		var v struct {
			Rec *Stored `json:"rec"`
		}
		if json.Unmarshal(d.Value, &v) != nil || v.Rec == nil {
			return loomtype.Entry{}, nil, false
		}
		rec = *v.Rec
	}
	e := rec.Entry()
	e.Cursor = loomtype.Cursor{Gen: ev.Gen, Seq: ev.Seq}.String()
	return e, rec.In, true
}

// mayHoldRec reports whether the JSON object v may have a member named "rec" (which
// encoding/json matches in any case): false only when no quoted "rec" appears in it, in any
// case, and it holds no \u escape that could spell one. It spares decoding the decisions that
// are not records, most of a log.
func mayHoldRec(v []byte) bool {
	for i := 0; i+4 < len(v); i++ {
		switch v[i] {
		case '"':
			if v[i+4] == '"' && v[i+1]|0x20 == 'r' && v[i+2]|0x20 == 'e' && v[i+3]|0x20 == 'c' {
				return true
			}
		case '\\':
			if v[i+1] == 'u' {
				return true
			}
		}
	}
	return false
}

// TurnsOf reads the count of accepted turns an event of a conversation's log holds, if any
// (found). legacy reports a verdict or record written before they held the count: the count is
// then to be found the old way.
func TurnsOf(ev kernel.LogEvent, gen int64) (n int64, found, legacy bool) {
	switch {
	case ev.Decision != nil:
		d := ev.Decision
		if !strings.HasPrefix(d.ID, IDPrefix) || len(d.Value) == 0 || d.Value[0] != '{' {
			return 0, false, false
		}
		var v struct {
			Turns *int64          `json:"turns"`
			Rec   json.RawMessage `json:"rec"`
		}
		if json.Unmarshal(d.Value, &v) != nil {
			return 0, false, false
		}
		if v.Turns == nil {
			counted := v.Rec != nil || strings.HasSuffix(d.ID, VerifySuffix)
			return 0, false, counted
		}
		return *v.Turns, true, false
	case ev.Start != nil:
		if gen == 0 {
			return 0, true, false
		}
		var carry struct {
			Seq *int64 `json:"seq"`
		}
		if json.Unmarshal(ev.Start.Input, &carry) != nil || carry.Seq == nil {
			return 0, false, true
		}
		return *carry.Seq, true, false
	}
	return 0, false, false
}

// Decide records the value fn returns as decision id, exactly once, and decodes the recorded
// value into v (a replay decodes what was recorded and never calls fn).
func Decide(c *kernel.Context, id string, v any, fn func() (any, error)) error {
	raw, err := c.DecideValue(id, fn)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// IdentityKey is the identity's key (loomtype.Identity.Key): "tenant/actor" or
// "tenant/actor~onBehalfOf", each field escaped so that no two identities share it.
func IdentityKey(id loomtype.Identity) string { return id.Key() }

// SignedAskerOf returns the asker of a payload that is an envelope for conversation id signed
// under one of keys: only those count against an asker's queue, so a payload nobody signed
// cannot use up someone else's share.
func SignedAskerOf(keys [][]byte, id string, payload json.RawMessage) (loomtype.Identity, bool) {
	e, err := envelope.Parse(payload)
	if err != nil || e.ConversationID != id || envelope.Verify(keys, e) != nil {
		return loomtype.Identity{}, false
	}
	return loomtype.Identity(e.Asker), true
}

// MemoryClassPrefix begins the class of an answer that drew on an asker's memory.
const MemoryClassPrefix = "memory:"

// ClassSet sorts cls and drops repeats (nil for none).
func ClassSet(cls []string) []string {
	if len(cls) == 0 {
		return nil
	}
	sort.Strings(cls)
	return slices.Compact(cls)
}

// ClearedCached asks the host (cleared) whether viewer may see every class, once per class set
// in cache; only an exact true clears, and a nil cleared clears nobody.
func ClearedCached(ctx context.Context, cleared func(context.Context, loomtype.Identity, []string) bool, viewer loomtype.Identity, classes []string, cache map[string]bool) bool {
	key := strings.Join(classes, "\x00")
	if v, ok := cache[key]; ok {
		return v
	}
	v := cleared != nil && cleared(ctx, viewer, classes)
	cache[key] = v
	return v
}
