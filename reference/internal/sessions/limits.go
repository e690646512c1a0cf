package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Defaults of the per-caller bounds of Config.
const (
	// DefaultPrincipalTickets is Config.PrincipalTickets when it names none.
	DefaultPrincipalTickets = 64
	// DefaultResidentBytes is Config.ResidentBytes when it names none (2 GiB).
	DefaultResidentBytes = 2 << 30
	// DefaultPrincipalResidentBytes is Config.PrincipalResidentBytes when it names none (64 MiB).
	DefaultPrincipalResidentBytes = 64 << 20
)

// QuotaReason says which of a caller's own bounds refused it.
type QuotaReason string

// The bounds a caller meets alone.
const (
	// QuotaTickets: the caller has Config.PrincipalTickets tickets waiting already.
	QuotaTickets QuotaReason = "tickets"
	// QuotaResident: the caller holds as many sessions as its share of the resident frame logs
	// allows (Config.PrincipalResidentBytes).
	QuotaResident QuotaReason = "resident"
)

// QuotaError is a caller past one of its own bounds; it matches loomtype.ErrLimit, and any other
// caller is not affected.
type QuotaError struct {
	Reason QuotaReason
	Max    int64
}

func (e *QuotaError) Error() string {
	return "sessions: caller's " + string(e.Reason) + " bound (" + strconv.FormatInt(e.Max, 10) + ") reached"
}

// Is makes a *QuotaError match loomtype.ErrLimit.
func (e *QuotaError) Is(target error) bool { return target == loomtype.ErrLimit }

// perLog is what each resident frame log is counted at: the most it may hold.
func (s *Service) perLog() int64 { return int64(max(s.cfg.Limits.MaxBytes, 1)) }

// maxResident is how many sessions may be resident at once: the resident budget over what each
// log is counted at, at least one and at most maxSessionsResident.
func (s *Service) maxResident() int {
	return int(min(int64(maxSessionsResident), max(1, s.cfg.ResidentBytes/s.perLog())))
}

// principalShare is how many resident sessions one caller may hold: its share over what each log
// is counted at, and at least one.
func (s *Service) principalShare() int {
	return int(max(1, s.cfg.PrincipalResidentBytes/s.perLog()))
}

// ticketSlot is ticket tk's place among who's tickets waiting: named by a digest of tk, so that
// the shared count never holds a ticket itself.
func ticketSlot(tk string, who loomtype.Identity, expires time.Time) quota.Slot {
	sum := sha256.Sum256([]byte(tk))
	var exp int64
	if !expires.IsZero() {
		exp = expires.UnixMilli()
	}
	return quota.Slot{Kind: quota.Tickets, Who: who, ID: hex.EncodeToString(sum[:16]), Expires: exp}
}

// TicketsWaiting is how many tickets wait now: made, neither presented nor expired. A ticket is
// kept by the service that made it, so a service that stops while one waits leaves it unknown
// to the next.
//
//	if svc.TicketsWaiting() == 0 { /* stopping now takes no ticket from a reader */ }
func (s *Service) TicketsWaiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := s.ticketsWaitingLocked()
	return n
}

// ticketsWaitingLocked counts the tickets waiting now and says when the last of them expires.
// s.mu held.
func (s *Service) ticketsWaitingLocked() (n int, last time.Time) {
	now := s.cfg.Now()
	for _, t := range s.tickets {
		if !t.used && now.Before(t.expires) {
			n++
			if t.expires.After(last) {
				last = t.expires
			}
		}
	}
	return n, last
}

// TicketsIdle returns a channel closed once no ticket waits (TicketsWaiting is 0): closed
// already when none waits now, else closed when the last one waiting is presented or dropped, or
// expires. A ticket may be made after it closed: a caller that needs none waiting reads
// TicketsWaiting after the wake-up and waits again.
//
//	for svc.TicketsWaiting() > 0 { <-svc.TicketsIdle() }
func (s *Service) TicketsIdle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, last := s.ticketsWaitingLocked()
	if n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.ticketsIdle == nil {
		s.ticketsIdle = make(chan struct{})
	}
	// No event marks an expiry: a timer looks again when the last ticket waiting expires.
	time.AfterFunc(last.Sub(s.cfg.Now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ticketsChangedLocked()
	})
	return s.ticketsIdle
}

// ticketsChangedLocked closes the channel TicketsIdle gave out once no ticket waits. Called after
// a ticket stopped waiting; s.mu held.
func (s *Service) ticketsChangedLocked() {
	if s.ticketsIdle == nil {
		return
	}
	if n, _ := s.ticketsWaitingLocked(); n == 0 {
		close(s.ticketsIdle)
		s.ticketsIdle = nil
	}
}

// ticketWaitsLocked reports whether a ticket of session id waits. s.mu held.
func (s *Service) ticketWaitsLocked(id string) bool {
	now := s.cfg.Now()
	for _, t := range s.tickets {
		if t.Session == id && !t.used && now.Before(t.expires) {
			return true
		}
	}
	return false
}

// Hold makes session id resident and counts it against who's share of the resident frame logs
// (chargeResident) when nobody's share counts it yet; a reader's connection asks it before it
// subscribes.
//
// Errors: *QuotaError (QuotaResident), *loomtype.LimitError, store errors.
//
//	if err := svc.Hold(ctx, alice, "c1"); err != nil { ... }
func (s *Service) Hold(ctx context.Context, who loomtype.Identity, id string) error {
	s.learnOwner(ctx, who, id)
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer s.release(ss)
	return s.chargeResident(ctx, who, ss)
}
