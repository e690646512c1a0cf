// Package loomtype holds the types and errors shared by every package of the reference engine and
// by programs that embed it: identities, cursors, transcript entries and the contract errors.
// It imports nothing of the engine, so any package may depend on it.
package loomtype

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Identity is who speaks or owns. Two identities are equal only when all three fields are equal;
// an empty field equals only an empty field. A delegate acting on behalf of the owner is therefore
// a different identity, and an identity without an Actor can own or join nothing.
//
//	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
//	alice.Equal(loomtype.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}) // false
type Identity struct {
	Tenant     string `json:"tenant,omitempty"`
	Actor      string `json:"actor"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
}

// Equal reports whether two identities are the same identity.
func (i Identity) Equal(o Identity) bool { return i == o }

// Valid reports whether the identity can own or join anything (it names an actor).
func (i Identity) Valid() bool { return i.Actor != "" }

// String renders the identity as its Key: tenant/actor, with "~onBehalfOf" when delegated, the
// fields escaped so that no two identities read alike.
func (i Identity) String() string { return i.Key() }

// Cursor is a position inside one conversation's own log: a generation (incremented by each
// rotation) and a sequence inside it. Its text form is "<generation>.<sequence>".
//
//	c, err := loomtype.ParseCursor("3.41") // Cursor{Gen: 3, Seq: 41}
type Cursor struct {
	Gen int64
	Seq int64
}

// String renders the cursor as "<generation>.<sequence>".
func (c Cursor) String() string {
	return strconv.FormatInt(c.Gen, 10) + "." + strconv.FormatInt(c.Seq, 10)
}

// Less orders cursors by generation, then sequence.
func (c Cursor) Less(o Cursor) bool { return c.Gen < o.Gen || (c.Gen == o.Gen && c.Seq < o.Seq) }

// ParseCursor parses "<generation>.<sequence>": two non-negative decimal integers of at most 18
// digits. Anything else is a *CursorError, which matches ErrInvalidCursor.
func ParseCursor(s string) (Cursor, error) {
	g, q, ok := strings.Cut(s, ".")
	if !ok || !digits(g) || !digits(q) {
		return Cursor{}, &CursorError{Cursor: s}
	}
	gen, _ := strconv.ParseInt(g, 10, 64)
	seq, _ := strconv.ParseInt(q, 10, 64)
	return Cursor{Gen: gen, Seq: seq}, nil
}

func digits(s string) bool {
	if len(s) == 0 || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Entry is one transcript record as history and the event stream show it.
type Entry struct {
	Cursor          string       `json:"cursor"`
	Ord             int64        `json:"ord"`
	Turn            int64        `json:"turn"`
	Role            Role         `json:"role"`
	Status          RecordStatus `json:"status"`
	Text            *string      `json:"text,omitempty"`
	Reason          Reason       `json:"reason,omitempty"`
	ErrorID         string       `json:"errorId,omitempty"`
	MessageID       string       `json:"messageId,omitempty"`
	EditOf          int64        `json:"editOf,omitempty"`
	EditOfTurn      int64        `json:"editOfTurn,omitempty"`
	Asker           *Identity    `json:"asker,omitempty"`
	Time            time.Time    `json:"time"`
	Classes         []string     `json:"classes,omitempty"`
	TurnExecutionID string       `json:"turnExecutionId,omitempty"`
}

// Role is who a transcript record speaks for.
type Role string

// RecordStatus is how a transcript record stands: a user message accepted or rejected, a reply
// complete, interrupted or failed, the close, or a record the viewer may not see.
type RecordStatus string

// Reason is the fixed word a rejected or failed record carries.
type Reason string

// Entry roles and statuses.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"

	StatusAccepted    RecordStatus = "accepted"
	StatusComplete    RecordStatus = "complete"
	StatusInterrupted RecordStatus = "interrupted"
	StatusFailed      RecordStatus = "failed"
	StatusRejected    RecordStatus = "rejected"
	StatusClosed      RecordStatus = "closed"
	StatusRestricted  RecordStatus = "restricted"
)

// Fixed reasons carried by rejected and failed records. They never say more than these words.
const (
	ReasonMalformed       Reason = "malformed"
	ReasonUnauthenticated Reason = "unauthenticated"
	ReasonReplayed        Reason = "replayed"
	ReasonStale           Reason = "stale"
	ReasonPromptTooLarge  Reason = "prompt-too-large"
	ReasonEditInvalid     Reason = "edit-invalid"
	ReasonNotParticipant  Reason = "not-a-participant"
	ReasonModelError      Reason = "model-error"
	ReasonDenied          Reason = "denied"
	ReasonTurnFailed      Reason = "turn-failed"
	ReasonCancelled       Reason = "cancelled"
)

// Mode is who may take part in a conversation: its owner alone, or explicit participants.
type Mode string

// Modes.
const (
	ModeOwner  Mode = "owner"
	ModeShared Mode = "shared"
)

// State is whether a conversation takes turns.
type State string

// States.
const (
	StateOpen   State = "open"
	StateClosed State = "closed"
)

// Status is what GET /conversations/{id} answers.
type Status struct {
	ID         string   `json:"id"`
	Mode       Mode     `json:"mode"`
	State      State    `json:"state"`
	Turns      int64    `json:"turns"`
	Generation int64    `json:"generation"`
	Owner      Identity `json:"owner"`
}

// Page is one bounded history read.
type Page struct {
	Entries    []Entry `json:"entries"`
	NextCursor string  `json:"nextCursor"`
	Done       bool    `json:"done"`
}

// Contract errors. Every refusal to a caller who may not touch a conversation is ErrNotFound, the
// same as for a conversation that does not exist.
var (
	ErrNotFound        = errors.New("loom: not found")
	ErrInvalidCursor   = errors.New("loom: invalid cursor")
	ErrInvalidID       = errors.New("loom: invalid conversation id")
	ErrConflict        = errors.New("loom: already started by another principal")
	ErrAlreadyStarted  = errors.New("loom: execution already started")
	ErrClosed          = errors.New("loom: closed")
	ErrBadRequest      = errors.New("loom: bad request")
	ErrUnauthenticated = errors.New("loom: unauthenticated")
	ErrLimit           = errors.New("loom: limit reached")
	ErrConfig          = errors.New("loom: invalid configuration")
	ErrDiverged        = errors.New("loom: replay diverged from the log")
	ErrStoreClosed     = errors.New("loom: store closed")
	// ErrCorrupt: what the store holds is damaged (a checksum that does not match, a structure the
	// database cannot read). Whatever meets it refuses rather than serving less or other data.
	ErrCorrupt = errors.New("loom: stored data is damaged")
)

// CursorError is a cursor that is not "<generation>.<sequence>". It matches ErrInvalidCursor.
type CursorError struct{ Cursor string }

func (e *CursorError) Error() string {
	return fmt.Sprintf("loom: invalid cursor %q: want <generation>.<sequence>", e.Cursor)
}

// Is makes errors.Is(err, ErrInvalidCursor) true.
func (e *CursorError) Is(target error) bool { return target == ErrInvalidCursor }

// DivergenceError says that re-running an execution did not do what its log recorded: at the
// Index-th command of generation Generation the log holds Want and the run did Got.
// It matches ErrDiverged.
//
//	var d *loomtype.DivergenceError
//	if errors.As(err, &d) { log.Printf("diverged at %d: want %s, got %s", d.Index, d.Want, d.Got) }
type DivergenceError struct {
	Execution  string
	Generation int64
	Index      int
	Want       string
	Got        string
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("loom: execution %s generation %d diverged at command %d: log has %s, run did %s",
		e.Execution, e.Generation, e.Index, e.Want, e.Got)
}

// Is makes errors.Is(err, ErrDiverged) true.
func (e *DivergenceError) Is(target error) bool { return target == ErrDiverged }

// LimitError is a limit that refused a request. It matches ErrLimit.
type LimitError struct {
	Limit string
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("loom: limit %s (%d) reached", e.Limit, e.Max)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }
