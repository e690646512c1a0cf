package loomtype

import (
	"crypto/rand"
	"encoding/hex"
)

// NewErrorID returns a fresh random id for an error report ("err_" and 24 hex digits): what a
// caller is shown in place of an internal error, and what the error is logged under. Safe for
// concurrent use.
//
//	id := loomtype.NewErrorID()
//	log.Error("internal error", "errorId", id, "error", err)
func NewErrorID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "err_" + hex.EncodeToString(b[:])
}
