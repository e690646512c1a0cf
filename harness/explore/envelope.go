package explore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// envelope is a signed user envelope (spec/envelopes.md), built by the explorer itself: the kit
// never signs with the implementation's own code.
type envelope struct {
	ConversationID string
	ID             string
	IAT            int64
	Text           string
	Tenant, Actor  string
}

// canonical is the byte string of spec/envelopes.md §3 for a user envelope without editOf.
func (e envelope) canonical() []byte {
	var b strings.Builder
	b.WriteString("loom/conversation/envelope/v1")
	b.WriteByte(0)
	b.WriteString(`{"asker":{`)
	first := true
	member := func(k, v string) {
		if v == "" {
			return
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(jcsString(k) + ":" + jcsString(v))
	}
	member("actor", e.Actor)
	member("tenant", e.Tenant)
	b.WriteString(`},"conversationId":` + jcsString(e.ConversationID))
	b.WriteString(`,"iat":` + strconv.FormatInt(e.IAT, 10))
	b.WriteString(`,"id":` + jcsString(e.ID))
	b.WriteString(`,"kind":"user","text":` + jcsString(e.Text) + `}`)
	return []byte(b.String())
}

// jcsString writes s as spec/envelopes.md §3 prescribes: only '"', '\' and control characters are
// escaped, the latter with lowercase hex.
func jcsString(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00` + string(hex[r>>4]) + string(hex[r&0xf]))
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// signed returns the envelope's wire form signed with key (§4).
func (e envelope) signed(key []byte) json.RawMessage {
	m := hmac.New(sha256.New, key)
	m.Write(e.canonical())
	sig := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	asker := map[string]string{"actor": e.Actor}
	if e.Tenant != "" {
		asker["tenant"] = e.Tenant
	}
	b, _ := json.Marshal(map[string]any{"conversationId": e.ConversationID, "kind": "user", "id": e.ID,
		"iat": e.IAT, "text": e.Text, "asker": asker, "sig": sig})
	return b
}
