package sessions

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/stream"
)

// Viewer is who a frame is drawn for: the caller, and whether the conversation is shared (in
// owner mode its one reader sees everything it may open).
type Viewer struct {
	Who    loomtype.Identity
	Shared bool
}

// Render draws it for viewer v of session id, replayed or live alike: in a shared conversation
// a turn's live text is shown to its asker only, and a record the viewer is not cleared for is
// shown as a hidden frame that keeps its cursor and holds nothing. The shared frame is never
// changed.
//
// Errors: loomtype.ErrNotFound when v may no longer read the session, other errors of the
// conversation layer.
//
//	f, err := svc.Render(ctx, "c1", sessions.Viewer{Who: bob, Shared: true}, it)
func (s *Service) Render(ctx context.Context, id string, v Viewer, it Item) (stream.Frame, error) {
	if !v.Shared {
		return it.Frame, nil
	}
	g := it.g
	switch {
	case g.Live:
		if g.AskerKey != v.Who.String() {
			return Hidden(it.Frame), nil
		}
	case g.Cursor != "" && g.Asker != v.Who && g.Classes != "":
		asker := g.Asker
		e := loomtype.Entry{Cursor: g.Cursor, Asker: &asker, Classes: strings.Split(g.Classes, ","), Role: loomtype.RoleUser}
		got, err := s.cv.View(ctx, v.Who, id, e)
		if err != nil {
			return stream.Frame{}, err
		}
		if got.Status == loomtype.StatusRestricted {
			return Hidden(it.Frame), nil
		}
	}
	return it.Frame, nil
}

// Hidden is the frame a viewer sees in place of f: the same cursor, id, session, turn and time,
// the type session.hidden and no data. A merged frame keeps its span, with as many empty parts,
// so that a reader's trim rule still applies to it.
func Hidden(f stream.Frame) stream.Frame {
	data := json.RawMessage("{}")
	if f.Span > 1 {
		data, _ = json.Marshal(map[string][]string{"parts": make([]string, f.Span)})
	}
	return stream.Frame{V: f.V, ID: f.ID, Cur: f.Cur, Session: f.Session, Turn: f.Turn, Type: "session.hidden",
		Time: f.Time, Span: f.Span, Data: data}
}
