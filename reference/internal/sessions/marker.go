package sessions

import (
	"context"
	"encoding/json"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// SubscribeAs is Subscribe for the reader who: the subscription also holds who's read marker
// as it stood at that moment (Sub.ReadMarker). The marker is read under the session's lock, as
// MarkRead stores a marker and sends its live frame, so the reader gets the stored marker first
// and then exactly the later moves, each past the one before: never an older marker after a
// newer one.
//
// Errors: as Subscribe, and store errors.
//
//	sub, replay, reset, head, floor, err := svc.SubscribeAs(ctx, alice, "c1", from)
//	if f, ok := sub.ReadMarker(); ok { ... } // after the replay
func (s *Service) SubscribeAs(ctx context.Context, who loomtype.Identity, id string, from int64) (sub *Sub, replay []stream.Frame, reset bool, head, floor int64, err error) {
	if from < 0 {
		return nil, nil, false, 0, 0, ErrBadFrom
	}
	s.learnOwner(ctx, who, id)
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return nil, nil, false, 0, 0, err
	}
	if err := ss.catchUp(ctx, nil); err != nil {
		s.release(ss)
		return nil, nil, false, 0, 0, err
	}
	ss.mu.Lock()
	sub, replay, reset, head, floor, err = ss.subscribeLocked(from)
	if err == nil {
		sub.reader = readerKey(who)
		sub.marker, sub.hasMarker, err = s.ReadMarkerFrame(ctx, who, id)
		if err != nil {
			delete(ss.subs, sub)
		}
	}
	ss.mu.Unlock()
	if err != nil {
		s.release(ss)
		return nil, nil, false, 0, 0, err
	}
	sub.release = func() { s.releaseReader(ss) }
	return sub, replay, reset, head, floor, nil
}

// ReadMarker is the reader's read marker as it stood when the subscription started, as the
// ephemeral frame to send after the replay; ok is false when there was none (or the
// subscription was not made with SubscribeAs).
func (s *Sub) ReadMarker() (f stream.Frame, ok bool) { return s.marker, s.hasMarker }

// MarkerGate passes a reader's read-marker frames only while they move its marker forward: one
// at or below what the reader was last sent is held back. The zero value has sent none.
type MarkerGate struct{ upto int64 }

// Pass reports whether f goes to the reader: every frame but a read marker at or below the
// last one passed.
func (g *MarkerGate) Pass(f stream.Frame) bool {
	if f.Kind() != stream.KindReadMarker {
		return true
	}
	n, ok := markerUpto(f)
	if !ok {
		return true
	}
	if n <= g.upto {
		return false
	}
	g.upto = n
	return true
}

// markerUpto is the position a read-marker frame carries.
func markerUpto(f stream.Frame) (int64, bool) {
	var d struct {
		Upto *int64 `json:"upto"`
	}
	if json.Unmarshal(f.Data, &d) != nil || d.Upto == nil {
		return 0, false
	}
	return *d.Upto, true
}
