package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A caller's share of the resident frame logs is counted by Config.Quotas, as its tickets are:
// with several partitions a node runs one engine per partition, and a count of this engine's
// sessions alone would let a caller hold its share once per engine. Each resident session
// charged to a caller holds one slot of kind quota.Resident there, named by the session's id and
// a name drawn when it was loaded, so that a session let go and loaded again is a new slot and
// a late release of the old one never frees the new one. The slot is given back by whoever
// takes the charge off the session: its last reader leaving with no ticket waiting
// (releaseReader), the pump when it stops (idle, evicted, broken, the service closed) or
// chargeResident when it lets the session go to make room. A slot left behind by an
// engine that died stops counting when its partition's next engine opens the counts.

// residentName names one load of session id among the slots of its caller's share.
func residentName(id string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return id + "#" + hex.EncodeToString(b[:])
}

// residentSlot is ss's slot in who's share.
func residentSlot(who loomtype.Identity, ss *session) quota.Slot {
	return quota.Slot{Kind: quota.Resident, Who: who, ID: ss.slot}
}

// isCharged reports whether ss counts against someone's share already.
func (s *Service) isCharged(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.charge[ss]
	return ok
}

// chargeResident counts resident session ss against who's share, unless it is counted against
// someone already. Past the share, who's sessions in this service that nobody reads and no
// ticket waits for are let go first (their frames are in the store: the next use loads them
// again), and the share is asked again; if who still holds its share, the answer is a
// *QuotaError (QuotaResident).
//
// Errors: *QuotaError (QuotaResident), store errors.
func (s *Service) chargeResident(ctx context.Context, who loomtype.Identity, ss *session) error {
	if s.isCharged(ss) {
		return nil
	}
	share := s.principalShare()
	slot := residentSlot(who, ss)
	err := s.cfg.Quotas.Admit(ctx, slot, share, s.cfg.Now().UnixMilli())
	if errors.Is(err, loomtype.ErrLimit) {
		n, lerr := s.letGo(ctx, who, ss)
		switch {
		case lerr != nil:
			return lerr
		case n > 0:
			err = s.cfg.Quotas.Admit(ctx, slot, share, s.cfg.Now().UnixMilli())
		}
	}
	switch {
	case errors.Is(err, loomtype.ErrLimit):
		if s.isCharged(ss) { // counted by another open of it meanwhile
			return nil
		}
		return &QuotaError{Reason: QuotaResident, Max: int64(share) * s.perLog()}
	case err != nil:
		return err
	}
	s.keepCharge(who, ss, slot)
	return nil
}

// keepCharge records that ss counts against who's share, whose slot was admitted: unless ss was
// charged meanwhile by another open, or is no longer resident (its pump has stopped, and would
// never give the slot back), in which case the slot goes back now (when it is not the one the
// session's charge holds).
func (s *Service) keepCharge(who loomtype.Identity, ss *session, slot quota.Slot) {
	s.mu.Lock()
	c, charged := s.charge[ss]
	resident := s.sessions[ss.id] == ss && !ss.dead()
	if !charged && resident {
		s.charge[ss] = slot
	}
	s.mu.Unlock()
	if (charged && c != slot) || (!charged && !resident) {
		s.giveBack(slot)
	}
}

// letGo stops who's sessions in this service other than keep that nobody reads and no ticket
// waits for, and those no longer resident whose charge is still kept, and gives their slots back;
// n is how many were let go.
//
// Errors: store errors (a slot not given back).
func (s *Service) letGo(ctx context.Context, who loomtype.Identity, keep *session) (n int, err error) {
	var gone []quota.Slot
	s.mu.Lock()
	for h, c := range s.charge {
		if h == keep || c.Who != who {
			continue
		}
		resident := s.sessions[h.id] == h && !h.dead()
		if resident && (h.refs > 0 || s.ticketWaitsLocked(h.id)) {
			continue
		}
		h.stop()
		if s.sessions[h.id] == h {
			delete(s.sessions, h.id)
		}
		delete(s.charge, h)
		gone = append(gone, c)
	}
	s.mu.Unlock()
	for _, sl := range gone {
		if rerr := s.cfg.Quotas.Release(ctx, sl); rerr != nil && err == nil {
			err = rerr
		}
	}
	return len(gone), err
}

// releaseReader is release for a reader whose subscription ends. Once nobody holds the session and
// no ticket waits for it, it stops counting against its caller's share: it stays resident until
// it goes idle or is let go, counted by nobody, and the share has room at once, in whichever
// engine (partition) the caller's next session is. A reader that comes back charges it again
// (Hold).
func (s *Service) releaseReader(ss *session) {
	s.mu.Lock()
	ss.refs--
	ss.lastUse = s.cfg.Now()
	c, charged := s.charge[ss]
	free := charged && ss.refs == 0 && !s.ticketWaitsLocked(ss.id)
	if free {
		delete(s.charge, ss)
	}
	s.mu.Unlock()
	if free {
		s.giveBack(c)
	}
}

// uncharge takes the charge off ss, whose pump has stopped, and gives its slot back.
func (s *Service) uncharge(ss *session) {
	s.mu.Lock()
	c, ok := s.charge[ss]
	delete(s.charge, ss)
	s.mu.Unlock()
	if ok {
		s.giveBack(c)
	}
}

// giveBack releases slot; one that cannot be released counts until the epoch of this
// service's counts is over (the partition's next engine).
func (s *Service) giveBack(slot quota.Slot) {
	if err := s.cfg.Quotas.Release(context.Background(), slot); err != nil {
		s.log.Warn("a resident session's slot was not given back", "error", err)
	}
}
