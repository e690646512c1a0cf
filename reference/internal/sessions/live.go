package sessions

import (
	"context"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// liveLocked logs the live events evs (after the records committed before them).
func (ss *session) liveLocked(ctx context.Context, evs []live.Event) error {
	// Records committed before this live output was made go first, up to (not including) the
	// reply of its turn, which was written after it.
	var t int64
	for _, ev := range evs {
		if ev.Kind != live.KindDone && (t == 0 || ev.Turn < t) {
			t = ev.Turn
		}
	}
	if err := ss.catchUpUntil(ctx, func(e loomtype.Entry) bool {
		return t > 0 && e.Role == loomtype.RoleAssistant && e.Turn >= t
	}); err != nil {
		return err
	}
	var specs []stream.Spec
	var guards []guard
	for _, ev := range evs {
		if ev.Turn <= ss.lastReplyTurn || ss.dropped[ev.Turn] {
			continue // the durable reply superseded it, or the turn was given up
		}
		g := guard{Live: true, AskerKey: ev.Asker, Ver: 1}
		switch ev.Kind {
		case live.KindDelta:
			for _, sp := range ss.ad.Apply(stream.Event{Kind: stream.EventDelta, Turn: ev.Turn, Text: ev.Text, Parent: ss.turnParent[ev.Turn]}) {
				if ev.Asker != "" {
					sp.ActsFor = ss.name(identityOf(ev.Asker))
				}
				specs, guards = append(specs, sp), append(guards, g)
			}
			ss.liveBytes[ev.Turn] += len(ev.Text)
		case live.KindReset:
			if ss.liveBytes[ev.Turn] == 0 {
				continue // nothing of the turn streamed since its last restart: nothing to void
			}
			specs = append(specs, ss.ad.Apply(stream.Event{Kind: stream.EventRestart, Turn: ev.Turn})...)
			guards = append(guards, guard{})
			ss.liveBytes[ev.Turn] = 0
		case live.KindTool:
			t := ev.Tool
			if t == nil {
				continue
			}
			in := stream.Event{Kind: stream.EventToolStarted, Turn: ev.Turn, Call: t.Call, Tool: t.Name}
			if t.Done {
				in.Kind, in.OK, in.Result, in.Text, in.People = stream.EventToolFinished, t.OK, t.Output, t.Error, ss.people
			}
			for _, sp := range ss.ad.Apply(in) {
				if ev.Asker != "" {
					sp.ActsFor = ss.name(identityOf(ev.Asker))
				}
				if t.Done {
					sp = ss.askerMayRead(ctx, sp, ev.Asker)
				}
				specs, guards = append(specs, sp), append(guards, g)
			}
		}
	}
	if _, err := ss.commit(ctx, specs, guards, ss.pos); err != nil {
		return err
	}
	return ss.catchUpLocked(ctx) // the reply held back above, and anything after it
}

// attachPartial logs what the live channel held of a running turn before the pump attached:
// the part of it this log has not shown yet, after a restart status when the turn is being
// produced again and this log showed some of an earlier run.
func (ss *session) attachPartial(ctx context.Context, turn int64, text, asker string, rerun bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// A turn the restored log shows streaming, with no end, was cut by the end of an earlier
	// process (the text it streamed is void: the turn is produced again, or its reply was
	// recorded whole), unless this process has held the session before and the turn is still
	// live here. Its restart status goes first, before the records.
	if open := ss.openTurns; len(open) > 0 {
		ss.openTurns = nil
		var evs []live.Event
		for _, t := range open {
			if ss.svc.heldBefore(ss.id) && t == turn && !rerun || ss.dropped[t] {
				continue
			}
			evs = append(evs, live.Event{Kind: live.KindReset, Turn: t})
		}
		if len(evs) > 0 {
			if err := ss.logRestarts(ctx, evs); err != nil {
				return err
			}
		}
	}
	ss.svc.markHeld(ss.id)
	// The records up to (not including) the live turn's reply: what the partial holds was made
	// before it, and goes first.
	if err := ss.catchUpUntil(ctx, func(e loomtype.Entry) bool {
		return turn > 0 && e.Role == loomtype.RoleAssistant && e.Turn >= turn
	}); err != nil {
		return err
	}
	if turn == 0 || turn <= ss.lastReplyTurn {
		return ss.catchUpLocked(ctx)
	}
	var evs []live.Event
	shown := ss.liveBytes[turn]
	if rerun && shown > 0 {
		evs = append(evs, live.Event{Kind: live.KindReset, Turn: turn})
		shown = 0
	}
	if len(text) > shown {
		evs = append(evs, live.Event{Kind: live.KindDelta, Turn: turn, Text: text[shown:], Asker: asker})
	}
	if len(evs) == 0 {
		return ss.catchUpLocked(ctx)
	}
	return ss.liveLocked(ctx, evs)
}

// attach subscribes the session to the live channel and logs what it already held of a running
// turn; with too many live subscribers it returns nil (records only, until a later attempt).
func (ss *session) attach(ctx context.Context) (*hubSub, <-chan struct{}) {
	at, err := ss.svc.cv.Hub().Attach(ss.id, DefaultMaxPending)
	if err != nil {
		return nil, nil
	}
	ss.mu.Lock()
	ss.liveSub = at.Sub
	ss.mu.Unlock()
	ss.report(ss.attachPartial(ctx, at.Turn, at.Text, at.Asker, at.Rerun))
	return at.Sub, at.Sub.Notify()
}

// pump follows the conversation until the session is idle, broken or stopped.
func (ss *session) pump() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-ss.quit
		cancel()
	}()
	defer func() {
		ss.mu.Lock()
		for s := range ss.subs {
			s.cut()
		}
		ss.subs = map[*Sub]struct{}{}
		ss.mu.Unlock()
		ss.broken.Store(true)
		ss.stop()
		ss.svc.uncharge(ss) // resident no more: its slot in its caller's share goes back
	}()
	hub := ss.svc.cv.Hub()
	var wake <-chan struct{}
	if ss.fol != nil {
		defer ss.fol.Close()
		wake = ss.fol.Wake()
	} else {
		w, stopWake := ss.svc.cv.WatchLog(ss.id)
		defer stopWake()
		wake = w
	}
	sub := ss.hubSub
	var notify <-chan struct{}
	if sub != nil {
		notify = sub.Notify()
	}
	attach := func() {
		sub, notify = ss.attach(ctx)
	}
	defer func() {
		if sub != nil {
			hub.Unsubscribe(ss.id, sub)
		}
	}()
	// A wake-up that came between the load and the watch is not lost: read once now.
	ss.report(ss.catchUp(ctx, nil))
	poll := time.NewTicker(ss.svc.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ss.quit:
			return
		case <-wake:
			ss.report(ss.catchUp(ctx, nil))
		case <-poll.C:
			if ss.svc.idle(ss) {
				return
			}
			if sub == nil {
				attach()
			}
			ss.report(ss.catchUpFromLog(ctx))
			ss.mu.Lock()
			ss.stopGivenUpLocked()
			ss.mu.Unlock()
		case <-notify:
			ss.mu.Lock()
			evs, overflow := sub.Drain()
			err := ss.liveLocked(ctx, evs)
			ss.mu.Unlock()
			ss.report(err)
			if overflow {
				hub.Unsubscribe(ss.id, sub)
				attach()
			}
		}
		if ss.dead() {
			return
		}
	}
}
