package threads

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// MaxKey is the longest client key a creating route takes (spec/peer.md, Roots).
const MaxKey = 128

// Routes a client key is scoped to.
const (
	idemConverse = "converse"
	idemTask     = "task"
	idemRun      = "run"
)

// ValidKey reports whether k may be a client key: 1 to MaxKey printable ASCII characters.
//
//	threads.ValidKey("retry-7") // true
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// idemKey is the key (in tabIdem) of who's client key on route within scope (a role, a task id). Each
// part is written with its length before it, so two different tuples never make the same key
// (short of a SHA-256 collision).
func idemKey(route string, who loomtype.Identity, scope, key string) string {
	h := sha256.New()
	for _, p := range []string{route, who.Tenant, who.Actor, who.OnBehalfOf, scope, key} {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// firstAnswer loads into v the answer a client key was given first; false when the key is new
// (or empty: no key, no deduplication).
func firstAnswer(tx *kernel.Tx, ix string, v any) (bool, error) {
	if ix == "" {
		return false, nil
	}
	return get(tx, tabIdem, ix, v)
}

// keepAnswer records v as the first answer under the client key, in the transaction that does
// what it answers.
func keepAnswer(tx *kernel.Tx, ix string, v any) error {
	if ix == "" {
		return nil
	}
	return put(tx, tabIdem, ix, v)
}

// idemIndex is idemKey, or "" when there is no client key.
func idemIndex(route string, who loomtype.Identity, scope, key string) string {
	if key == "" {
		return ""
	}
	return idemKey(route, who, scope, key)
}
