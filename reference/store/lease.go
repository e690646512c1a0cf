package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is the right of one holder to write under a name, for a while. Token is its fencing
// token: every grant of the name, to whatever holder, has a token greater than every grant
// before it, so a write fenced by an older token is refused once a newer grant exists.
type Lease struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	// Note is what the holder published with its grant (the reference engine puts the address
	// other nodes forward requests to).
	Note  string `json:"note,omitempty"`
	Token int64  `json:"token"`
	// Expires is when the grant lapses unless renewed, by the store's clock.
	Expires time.Time `json:"expires"`
}

// Leases is a store that several nodes share: a lease names who may write, and a fenced view
// refuses the writes of a holder whose grant was superseded.
//
// The rule (the store suite checks it on every backend): Acquire grants a name that is free,
// lapsed, or held by the same holder (a holder that restarted takes its name back at once, and
// its earlier incarnation is fenced by the new token); a name held by another holder and not
// lapsed is refused with ErrLeaseHeld. Every Update through Fence(l) checks, in the same
// transaction as its writes, that l.Token is still the newest grant of l.Name; if not it writes
// nothing and answers ErrFenced. A lapsed grant nobody took again still fences nothing: the
// token, not the clock, decides who may write.
//
//	l, err := st.(store.Leases).Acquire(ctx, "engine", "node-1", "10.0.0.7:8080", 5*time.Second)
//	if errors.Is(err, store.ErrLeaseHeld) { /* another node owns it; forward to l.Note */ }
//	fenced := st.(store.Leases).Fence(l)
type Leases interface {
	// Acquire takes name for holder for ttl, publishing note. Errors: ErrLeaseHeld (with the
	// current grant in *HeldError), ErrClosed.
	Acquire(ctx context.Context, name, holder, note string, ttl time.Duration) (Lease, error)
	// Renew extends l by ttl from now. Errors: ErrFenced when a newer grant of l.Name exists.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release gives l up (it lapses at once), if it is still the newest grant.
	Release(ctx context.Context, l Lease) error
	// Holder returns the newest grant of name; ok is false when the name was never granted.
	Holder(ctx context.Context, name string) (l Lease, ok bool, err error)
	// Grants returns the newest grant of every name that starts with prefix ("" for every
	// name), in byte order of the names, as one read at one moment: each name once, with its
	// newest token, lapsed and released grants included with their Expires (the caller judges
	// them against its own clock or the next Acquire). Names never granted are absent; an empty
	// answer is no error. Errors: ErrClosed.
	//
	// Grants belongs to Leases rather than standing beside it as a capability of its own: a
	// node sharing out partitions reads every grant of a prefix before it routes a request or
	// frees a lost holder's slots, and a backend that keeps grants at all keeps them where one
	// query lists them; the alternative, Holder name after name, reads no single moment and
	// would be a second path nothing uses.
	Grants(ctx context.Context, prefix string) ([]Lease, error)
	// Fence returns a view of the store whose every Update is refused with ErrFenced, writing
	// nothing, once a grant of l.Name newer than l exists. Reads and subscriptions pass through.
	Fence(l Lease) Store
}

var (
	// ErrLeaseHeld: another holder has the lease and it has not lapsed. The error is a
	// *HeldError naming the grant.
	ErrLeaseHeld = errors.New("store: lease held by another holder")
	// ErrFenced: a newer grant of the lease exists; the write was refused and nothing of it kept.
	ErrFenced = errors.New("store: fenced by a newer lease")
)

// HeldError is ErrLeaseHeld with the grant in force.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("store: lease %s held by %s (token %d) until %s", e.Lease.Name, e.Lease.Holder, e.Lease.Token, e.Lease.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// SchemaError is a store whose schema is newer than this binary knows: it was written by a
// later version, and this one refuses it rather than guess.
type SchemaError struct {
	// Where names the store (a file, a database).
	Where string
	// Have is the store's schema version, Know the newest this binary knows.
	Have, Know int64
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("store: %s has schema version %d, newer than this engine's %d (upgrade the engine, or restore a backup made for this version)", e.Where, e.Have, e.Know)
}

// Is makes errors.Is(err, ErrSchemaNewer) true.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaNewer }

// ErrSchemaNewer: the store was written by a newer version of the engine (*SchemaError).
var ErrSchemaNewer = errors.New("store: schema newer than this engine")
