package threads

import (
	"context"
	"errors"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// count reads the bounds' counts from the store: the texts waiting to be sent and the peer's
// texts waiting for a turn, per connection.
func (s *Service) count(ctx context.Context) error {
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		for _, t := range rec.Texts {
			switch {
			case t.Dir == dirIn && t.Taken == 0:
				s.waiting[rec.Conn]++
			case t.Dir == dirOut && t.State == txQueued:
				s.queued[rec.Conn]++
			}
		}
	}
	return nil
}

// Resume picks up what a stop or a crash left: every turn recorded as running is started if its
// execution never was (a crash between the record and the start) and awaited, and every agent
// conversation with texts queued to be sent is delivered again. Call it once, after the kernel
// is open.
//
// Errors: store errors.
//
//	if err := svc.Resume(ctx); err != nil { return err }
func (s *Service) Resume(ctx context.Context) error {
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return err
	}
	var starts []startReq
	s.mu.Lock()
	for _, rec := range recs {
		if t := rec.running(); t != nil {
			starts = append(starts, startReq{kind: kindAgent, ref: rec.ID, exec: t.Exec})
		}
	}
	for _, rec := range recs {
		for _, t := range rec.Texts {
			if t.Dir == dirOut && t.State == txQueued {
				s.kick(rec.ID)
				break
			}
		}
	}
	s.mu.Unlock()
	pcs, err := all[pcRec](ctx, s.k, tabPC)
	if err != nil {
		return err
	}
	for _, pc := range pcs {
		for _, t := range pc.Turns {
			if t.Status == stRunning {
				starts = append(starts, startReq{kind: kindPerson, ref: pc.ID, exec: t.Exec})
			}
		}
	}
	runs, err := all[runRec](ctx, s.k, tabRun)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Status == stRunning {
			starts = append(starts, startReq{kind: kindTask, ref: r.ID, exec: r.Exec})
		}
	}
	for _, r := range starts {
		if _, err := s.k.Info(ctx, r.exec); errors.Is(err, loomtype.ErrNotFound) {
			var in turnInput
			ok, err := s.read(ctx, tabTurnIn, r.exec, &in)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			r.in = in
			s.launch(ctx, r)
			continue
		} else if err != nil {
			s.cfg.Logger.Error("threads: a turn cannot be resumed", "execution", r.exec, "err", err)
			continue
		}
		s.await(r.kind, r.ref, r.exec)
	}
	return nil
}
