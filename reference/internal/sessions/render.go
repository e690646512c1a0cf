package sessions

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Viewer is who a frame is drawn for: the caller, and whether the conversation is shared (in
// owner mode its one reader sees everything it may open).
type Viewer struct {
	Who    loomtype.Identity
	Shared bool
	// name is Who's name in the session's frames, learnt by ViewerOf ("": worked out per frame).
	name string
}

// ViewerOf returns the viewer who of session id: whether the chat is shared. Who was in the room
// when is not read here: each frame a reader receives carries the session's room as it stood
// when the frame was logged or replayed (Render), so no log is scanned per connection.
//
// Errors: loomtype.ErrNotFound, errors of the conversation layer.
//
//	v, err := svc.ViewerOf(ctx, bob, "c1")
func (s *Service) ViewerOf(ctx context.Context, who loomtype.Identity, id string) (Viewer, error) {
	st, err := s.cv.Status(ctx, who, id)
	if err != nil {
		return Viewer{}, err
	}
	if _, ok := s.owners.get(id); !ok {
		s.owners.put(id, st.Owner.Tenant)
	}
	return Viewer{Who: who, Shared: st.Mode == loomtype.ModeShared, name: s.nameOf(id, who)}, nil
}

// Render draws it for viewer v of session id, replayed or live alike. In a shared conversation
// a frame the assistant put into the room is received only if the room's mayReceive says so
// (stream.Room.MayReceive with the frame's ver: v was in the room when its reply handle opened,
// and is now), a turn's live text is shown to its asker only, and a record the viewer is not
// cleared for is shown as a hidden frame that keeps its cursor and holds nothing; each check is
// a lookup, with no scan of the log. The shared frame is never changed.
//
// Errors: loomtype.ErrNotFound when v may no longer read the session, other errors of the
// conversation layer.
//
//	f, err := svc.Render(ctx, "c1", sessions.Viewer{Who: bob, Shared: true}, it)
func (s *Service) Render(ctx context.Context, id string, v Viewer, it Item) (stream.Frame, error) {
	f, _, err := s.render(ctx, id, v, it)
	return f, err
}

// Draw is Render with the drawn frame's encoding as JSON when the service has it: the one
// encoding of a live frame shared by every viewer who sees it as it was logged, so that a frame
// fanned out to many readers is encoded once. enc is nil when the viewer sees a frame of their
// own (a placeholder, a record drawn for their roles) or the item was not encoded; the caller
// then encodes the frame itself.
//
// Errors: those of Render.
//
//	f, enc, err := svc.Draw(ctx, "c1", viewer, it)
func (s *Service) Draw(ctx context.Context, id string, v Viewer, it Item) (f stream.Frame, enc []byte, err error) {
	if it.alike && it.enc != nil {
		return it.Frame, it.enc, nil
	}
	f, asIs, err := s.render(ctx, id, v, it)
	if err != nil || !asIs {
		return f, nil, err
	}
	return f, it.enc, nil
}

// render is Render; asIs says the frame drawn is the item's own, unchanged.
func (s *Service) render(ctx context.Context, id string, v Viewer, it Item) (stream.Frame, bool, error) {
	if !v.Shared {
		return it.Frame, true, nil
	}
	g := it.g
	me := v.name
	if me == "" {
		me = s.nameOf(id, v.Who)
	}
	switch {
	case it.Frame.Rid != "" && !it.room.MayReceive(me, it.Frame.Ver):
		// Its reply handle opened before the viewer was in the room, or they are out of it.
		return Hidden(it.Frame), false, nil
	case it.Frame.Rid == "" && g.Ver > 0 && !it.room.MayReceiveAt(me, it.Frame.Cur):
		// Logged before reply handles existed, and before the viewer joined.
		return Hidden(it.Frame), false, nil
	}
	switch {
	case g.Live:
		if g.AskerKey != v.Who.Key() {
			return Hidden(it.Frame), false, nil
		}
	case g.Cursor != "" && g.Asker != v.Who && g.Classes != "":
		asker := g.Asker
		e := loomtype.Entry{Cursor: g.Cursor, Asker: &asker, Classes: strings.Split(g.Classes, ","), Role: loomtype.RoleUser}
		got, err := s.cv.View(ctx, v.Who, id, e)
		if err != nil {
			return stream.Frame{}, false, err
		}
		if got.Status == loomtype.StatusRestricted {
			return Hidden(it.Frame), false, nil
		}
	}
	return s.forRoles(ctx, id, v.Who, me, it.Frame)
}

// forRoles draws a frame's record block for who (named me in the session's frames): the roles
// it names are looked up as classes who must be cleared for (the conversation's clearance), and
// stream.Render hides what who does not hold. A frame without a record block is returned as it
// is (asIs).
func (s *Service) forRoles(ctx context.Context, id string, who loomtype.Identity, me string, f stream.Frame) (stream.Frame, bool, error) {
	roles := recordRoles(f)
	if len(roles) == 0 {
		return f, true, nil
	}
	held, err := s.heldRoles(ctx, id, who, roles)
	if err != nil {
		return stream.Frame{}, false, err
	}
	return stream.Render(f, stream.Viewer{ID: me, ReadRoles: held}), false, nil
}

// heldRoles returns the roles of roles that who is cleared for in conversation id.
func (s *Service) heldRoles(ctx context.Context, id string, who loomtype.Identity, roles []string) ([]string, error) {
	var held []string
	for _, r := range roles {
		got, err := s.cv.View(ctx, who, id, loomtype.Entry{Role: loomtype.RoleAssistant, Classes: []string{r}})
		if err != nil {
			return nil, err
		}
		if got.Status != loomtype.StatusRestricted {
			held = append(held, r)
		}
	}
	return held, nil
}

// recordRoles lists the roles a frame's record block names: its read_roles and the role of each
// role-marked field.
func recordRoles(f stream.Frame) []string {
	var d struct {
		Block struct {
			Kind      string                     `json:"kind"`
			ReadRoles []string                   `json:"read_roles"`
			Fields    map[string]json.RawMessage `json:"fields"`
		} `json:"block"`
	}
	if f.Kind() != stream.KindToolFinished || json.Unmarshal(f.Data, &d) != nil || d.Block.Kind != "record" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(r string) {
		if r != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, r := range d.Block.ReadRoles {
		add(r)
	}
	for _, raw := range d.Block.Fields {
		var fv struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(raw, &fv) == nil {
			add(fv.Role)
		}
	}
	return out
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
