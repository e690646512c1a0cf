package sessions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// DefaultResumeWait is how long a turn left open by an earlier process may take to end once the
// service has started (Config.ResumeWait).
const DefaultResumeWait = 60 * time.Second

// The status a turn gets when it did not end within the resume wait (spec/stream.md): a failed
// state and a note asking the person to ask again, with no reply handle.
const (
	ResumeFailedState = "failed"
	ResumeFailedNote  = "couldn't resume, ask again"
)

// resumeWaits finds every session whose stored position shows a turn asked and not answered (a
// turn the earlier process left open, which the engine recovers) and starts one wait for them
// all: once Config.ResumeWait has passed since the service started, each such turn still without
// its reply is given up (giveUp).
func (s *Service) resumeWaits(ctx context.Context) error {
	rows, err := positions.All(ctx, s.k, "")
	if err != nil {
		return err
	}
	type open struct {
		id   string
		turn int64
	}
	var waiting []open
	for _, row := range rows {
		if p := row.Value; p.LastAsked > p.LastReply {
			waiting = append(waiting, open{row.Key, p.LastAsked})
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(time.Until(s.started.Add(s.cfg.ResumeWait)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.quit:
			return
		}
		for _, w := range waiting {
			if err := s.giveUp(context.Background(), w.id, w.turn); err != nil {
				s.log.Error("session stream: giving up a turn that did not resume", "session", w.id, "turn", w.turn, "err", err)
			}
		}
	}()
	return nil
}

// giveUp ends the wait for turn of session id: a turn that has its reply by now is left alone;
// otherwise the status {state: failed, note} is logged, durably, nothing the turn produces from
// then on is shown (its live text, its tools, its reply), and the turn is stopped through its
// abort checkpoint (at once, or at a later poll when the recovered turn has not reached it yet).
func (s *Service) giveUp(ctx context.Context, id string, turn int64) error {
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return err
	}
	if ss.lastReplyTurn >= turn || ss.dropped[turn] {
		return nil
	}
	spec := stream.Spec{Kind: stream.KindStatus, Turn: turn,
		Data: map[string]string{"state": ResumeFailedState, "note": ResumeFailedNote}}
	if _, err := ss.commit(ctx, []stream.Spec{spec}, nil, ss.pos); err != nil {
		return err
	}
	ss.dropped[turn] = true
	ss.stopTurn = turn
	ss.stopGivenUpLocked()
	return nil
}

// stopGivenUpLocked stops the given-up turn through the live channel's stopper when that turn
// runs here and has no reply yet.
func (ss *session) stopGivenUpLocked() {
	if ss.stopTurn == 0 || ss.stopTurn <= ss.lastReplyTurn {
		ss.stopTurn = 0
		return
	}
	if turn, _, fire, ok := ss.svc.cv.Hub().Stopper(ss.id); ok && turn == ss.stopTurn {
		fire()
	}
}

// givenUp reports whether f is the status of a turn given up after a restart.
func givenUp(f stream.Frame) bool {
	if f.Kind() != stream.KindStatus {
		return false
	}
	var d struct {
		State string `json:"state"`
		Note  string `json:"note"`
	}
	_ = json.Unmarshal(f.Data, &d)
	return d.State == ResumeFailedState && d.Note == ResumeFailedNote
}
