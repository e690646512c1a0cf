package sessions

import (
	"encoding/json"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// privateKey is the key a private message is stored once under: its sender's identity key
// (loomtype.Identity.Key) and its message id, as a JSON array, so that no two (sender, id) pairs
// share a key. A message id is its sender's own: another person's message under the same id is
// another message.
func privateKey(who loomtype.Identity, messageID string) string {
	b, _ := json.Marshal([]string{who.Key(), messageID})
	return string(b)
}
