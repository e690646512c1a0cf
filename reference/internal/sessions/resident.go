package sessions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// acquire returns the resident session id, loading it from the store and starting its pump on
// first use, and holds a reference to it until release.
func (s *Service) acquire(ctx context.Context, id string) (*session, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, loomtype.ErrStoreClosed
		}
		ss := s.sessions[id]
		if ss != nil && !ss.dead() {
			ss.refs++
			ss.lastUse = s.cfg.Now()
			s.mu.Unlock()
			return ss, nil
		}
		// One load of a session at a time: two loads would each project, and write, the same
		// frames.
		if wait := s.loading[id]; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if len(s.sessions) >= s.maxResident() {
			s.evictIdle()
			if len(s.sessions) >= s.maxResident() {
				s.mu.Unlock()
				return nil, &loomtype.LimitError{Limit: "streamed sessions", Max: int64(s.maxResident())}
			}
		}
		done := make(chan struct{})
		s.loading[id] = done
		s.mu.Unlock()
		return s.loadResident(ctx, id, done)
	}
}

// loadResident loads session id, subscribes it to the live channel, makes it resident and
// starts its pump; done is closed (and the load gate opened) whatever the outcome.
func (s *Service) loadResident(ctx context.Context, id string, done chan struct{}) (*session, error) {
	defer func() {
		s.mu.Lock()
		delete(s.loading, id)
		s.mu.Unlock()
		close(done)
	}()
	loaded, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	// The conversation's commits from now on reach the session from its tail, and live events
	// too: both are subscribed to before the caller goes on, so a turn it starts next is seen
	// live.
	loaded.fol = s.cv.Follow(id)
	loaded.hubSub, _ = loaded.attach(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if loaded.hubSub != nil {
			s.cv.Hub().Unsubscribe(id, loaded.hubSub)
		}
		loaded.fol.Close()
		return nil, loomtype.ErrStoreClosed
	}
	loaded.refs = 1
	loaded.lastUse = s.cfg.Now()
	s.sessions[id] = loaded
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		loaded.pump()
	}()
	return loaded, nil
}

func (s *Service) release(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.refs--
	ss.lastUse = s.cfg.Now()
}

// idle reports whether ss has had no reference for Config.Idle and no ticket waits for it; if
// so it is removed from the resident sessions.
func (s *Service) idle(ss *session) bool {
	ss.mu.Lock()
	busy := ss.queue.Awaiting != "" || ss.waitingLocked() > 0
	ss.mu.Unlock()
	if busy {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.refs > 0 || s.cfg.Now().Sub(ss.lastUse) < s.cfg.Idle {
		return false
	}
	now := s.cfg.Now()
	for _, t := range s.tickets {
		if t.Session == ss.id && !t.used && now.Before(t.expires) {
			return false
		}
	}
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	return true
}

func (s *Service) evictIdle() {
	now := s.cfg.Now()
	for id, ss := range s.sessions {
		if ss.refs == 0 && now.Sub(ss.lastUse) >= s.cfg.Idle {
			ss.stop()
			delete(s.sessions, id)
		}
	}
}

// load reads session id's frames and projection position through the kernel.
func (s *Service) load(ctx context.Context, id string) (*session, error) {
	ss := newSession(s, id)
	head, err := s.k.AuxHead(ctx, id, framesStream)
	if err != nil {
		return nil, err
	}
	if head > 0 {
		var rows []kernel.AuxEvent
		before := head + 1
		for int64(len(rows)) < head && len(rows) < s.cfg.Limits.MaxFrames {
			evs, err := s.k.ReadAuxBackward(ctx, id, framesStream, before, min(kernel.MaxRead, s.cfg.Limits.MaxFrames-len(rows)))
			if err != nil {
				return nil, err
			}
			if len(evs) == 0 {
				break
			}
			rows = append(rows, evs...)
			before = evs[len(evs)-1].Seq
		}
		frames := make([]stream.Frame, 0, len(rows))
		guards := make(map[int64]guard, len(rows))
		for i := len(rows) - 1; i >= 0; i-- {
			var rec diskFrame
			if err := json.Unmarshal(rows[i].Data, &rec); err != nil || rec.F.Cur != rows[i].Seq {
				return nil, &FrameError{Session: id, Cur: rows[i].Seq}
			}
			frames = append(frames, rec.F)
			if rec.G != (guard{}) {
				guards[rec.F.Cur] = rec.G
			}
		}
		if err := ss.log.Restore(frames); err != nil {
			return nil, fmt.Errorf("sessions: restoring %s: %w", id, err)
		}
		ss.guards = guards
		ss.restoreStreamed(frames)
		for _, f := range frames {
			ss.room = ss.room.Apply(f) // replaced by the stored room, when the position holds one
		}
	}
	p, ok, err := positions.Get(ctx, s.k, id)
	if err != nil {
		return nil, err
	}
	if ok {
		c, err := loomtype.ParseCursor(p.Next)
		if err != nil {
			return nil, &kernel.RecordError{Table: positions.Name(), Key: id, Err: err}
		}
		ss.pos, ss.lastReplyTurn, ss.lastAskedTurn, ss.lastAsker = c, p.LastReply, p.LastAsked, p.LastAsker
		if p.Room != nil {
			ss.room = p.Room.Room
		}
		ss.roomEnc = nil
		for t, v := range p.Handles {
			ss.handles[t] = v
		}
		if _, known := s.owners.get(id); !known && p.Owner != nil {
			s.owners.put(id, *p.Owner)
		}
	}
	ss.restorePosition(p, ok)
	if err := ss.fillLost(ctx, p, ok); err != nil {
		return nil, err
	}
	if ss.queue, err = s.loadQueue(ctx, id); err != nil {
		return nil, err
	}
	return ss, nil
}
