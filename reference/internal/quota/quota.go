// Package quota keeps the bounds one principal meets on the whole system, whichever engine
// serves it: the event and session streams it has open, the session tickets it has waiting, the
// sessions it holds resident and its POSTs a minute (spec/http.md, Settings and their defaults
// and The event stream; spec/stream.md, Limits).
//
// A node may run one engine per partition of a store, and a principal's requests land on any of
// them; a count kept in one engine's memory would let a principal hold the bound once per engine.
// Shared keeps each count as a record of the store's global namespace instead, read and rewritten
// in one transaction of the store, so that two engines never both admit the slot past the bound.
// Memory keeps the same counts in one process, for an engine alone on its store and for tests.
//
// A slot held by an engine that stopped without giving it back (a crash, a lost partition) is
// freed without a sweeper: every engine that opens Shared under a holder name (its partition)
// raises that holder's epoch, each slot records the holder and epoch that took it, and an
// admission drops every slot whose holder has a newer epoch, since the engine that took it is gone.
package quota

import (
	"context"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Kind names one bound a principal meets on the whole system.
type Kind string

// The bounds kept here.
const (
	// Streams: the event and session streams a principal has open (gateway.maxStreamsPerPrincipal).
	Streams Kind = "streams"
	// Tickets: the session tickets a principal has waiting, made and neither presented nor
	// expired (stream.principalTickets).
	Tickets Kind = "tickets"
	// Resident: the sessions whose frame logs are held in memory on a principal's behalf, each
	// counted at the most its log may hold, against its share (stream.principalResidentBytes).
	Resident Kind = "resident"
	// AllStreams: the event and session streams open on the whole system, everyone's
	// (gateway.maxStreams), counted under System.
	AllStreams Kind = "all-streams"
)

// System is the Who of the bounds of the whole system rather than of one principal (AllStreams):
// no principal's identity, so never a principal's count.
var System = loomtype.Identity{}

// Slot is one thing a principal holds against a bound: a stream, a ticket, a resident session.
type Slot struct {
	Kind Kind
	Who  loomtype.Identity
	// ID names the slot among who's slots of Kind; taking an ID held already takes nothing more.
	ID string
	// Expires, in Unix milliseconds, is when the slot stops counting by itself (0: never).
	Expires int64
}

// Refusal is an admission past a bound: who holds Max slots of Kind already. It matches
// loomtype.ErrLimit.
type Refusal struct {
	Kind Kind
	Max  int
}

func (e *Refusal) Error() string {
	return "quota: principal's " + string(e.Kind) + " bound (" + strconv.Itoa(e.Max) + ") reached"
}

// Is makes a *Refusal match loomtype.ErrLimit.
func (e *Refusal) Is(target error) bool { return target == loomtype.ErrLimit }

// Counter admits and releases slots. Safe for concurrent use.
type Counter interface {
	// Admit takes slot s when s.Who holds fewer than max live slots of s.Kind, or when it holds
	// s.ID already; now (Unix milliseconds) is what an expiry is compared with.
	//
	// Errors: *Refusal, store errors.
	Admit(ctx context.Context, s Slot, max int, now int64) error
	// Release gives slot s back (nothing when it is not held).
	//
	// Errors: store errors.
	Release(ctx context.Context, s Slot) error
	// Held counts the live slots of kind who holds at now.
	//
	// Errors: store errors.
	Held(ctx context.Context, kind Kind, who loomtype.Identity, now int64) (int, error)
	// Take takes one of who's POSTs at now (Unix milliseconds) from its allowance of perMinute a
	// minute, and at once (the Posts bound).
	//
	// Errors: *Refusal (Kind Posts, Max perMinute), store errors.
	Take(ctx context.Context, who loomtype.Identity, perMinute int, now int64) error
}
