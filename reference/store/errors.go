package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Errors of a damaged or missing store.
var (
	// ErrCorrupt: what the store holds is damaged. Every *CorruptError matches it; it matches
	// loomtype.ErrCorrupt.
	ErrCorrupt = loomtype.ErrCorrupt
	// ErrMissing: the store was created at this path (its identity file says so) and its data is
	// gone: the database file is missing, or holds another store or none. Open refuses it unless
	// Options.AllowEmpty.
	ErrMissing = errors.New("store: the store's data is gone")
)

// CorruptError is damage the store found: a record whose checksum does not match, a stream whose
// sequence has a gap, a write-ahead log with frames past a damaged one, or a database the engine
// cannot read. It names what it can; it matches ErrCorrupt.
//
//	var ce *store.CorruptError
//	if errors.As(err, &ce) { log.Printf("damaged %s %s/%d/%d", ce.Table, ce.Stream, ce.Gen, ce.Seq) }
type CorruptError struct {
	// Path is the file the store lives in.
	Path string
	// Table is where the damage is: "events", "meta", "remembered", "leases", "identity",
	// "head" (the count of acknowledged events kept beside the database), "wal" or "database"
	// (the file itself).
	Table string
	// Stream, Gen and Seq name the event (Table "events").
	Stream   string
	Gen, Seq int64
	// Key names the metadata or remembered key (Table "meta", "remembered").
	Key string
	// Reason says what is wrong.
	Reason string
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s is damaged: %s", e.Path, e.Table)
	switch {
	case e.Table == "events":
		fmt.Fprintf(&b, " %s/%d/%d", e.Stream, e.Gen, e.Seq)
	case e.Key != "":
		fmt.Fprintf(&b, " %q", e.Key)
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// Unwrap makes a CorruptError match ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
