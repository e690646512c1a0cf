package threads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TextView is one text of an agent conversation as it is read.
type TextView struct {
	Dir     string `json:"dir"`
	Message string `json:"message"`
	Text    string `json:"text"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// TurnView is one turn of an agent conversation as it is read.
type TurnView struct {
	Turn   int      `json:"turn"`
	Status string   `json:"status"`
	Texts  []string `json:"texts"`
	Output *string  `json:"output,omitempty"`
}

// View is an agent conversation as it is read (schemas/agent-conversation.schema.json).
type View struct {
	ID         string     `json:"id"`
	Connection string     `json:"connection"`
	Thread     string     `json:"thread"`
	Role       string     `json:"role"`
	PeerRole   string     `json:"peerRole"`
	StartedBy  string     `json:"startedBy"`
	Root       Root       `json:"root"`
	State      string     `json:"state"`
	Texts      []TextView `json:"texts"`
	Turns      []TurnView `json:"turns"`
}

// ConnectionView is a connection as its owner reads it.
type ConnectionView struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

func (a *acRec) view() View {
	v := View{ID: a.ID, Connection: a.Conn, Thread: a.Thread, Role: a.Role, PeerRole: a.PeerRole, StartedBy: a.StartedBy,
		Root: a.Root, State: "open", Texts: []TextView{}, Turns: []TurnView{}}
	if a.Gone {
		v.Root = Root{Kind: rootGone, ID: a.Root.ID}
	}
	if a.Closed {
		v.State = "closed"
	}
	for i, t := range a.Texts {
		text, _ := a.text(i) // a text that cannot be read shows empty
		v.Texts = append(v.Texts, TextView{Dir: t.Dir, Message: t.Message, Text: text, State: t.State, Reason: t.Reason})
	}
	for _, t := range a.Turns {
		v.Turns = append(v.Turns, TurnView{Turn: t.Turn, Status: t.Status, Texts: append([]string{}, t.Texts...), Output: t.Output})
	}
	return v
}

// mayRead reports whether who reads rec (spec/peer.md, Reading).
func (s *Service) mayRead(ctx context.Context, who loomtype.Identity, rec *acRec) (bool, error) {
	if role, ok := s.roleOf(who); ok {
		return role == rec.Role, nil
	}
	if !who.Valid() {
		return false, nil
	}
	conn := s.conns[rec.Conn]
	if rec.Gone {
		return conn != nil && conn.Owner.Equal(who), nil
	}
	switch rec.Root.Kind {
	case rootConv:
		var pc pcRec
		ok, err := s.read(ctx, tabPC, rec.Root.ID, &pc)
		return ok && pc.Person.Equal(who), err
	case rootTask:
		var tk taskRec
		ok, err := s.read(ctx, tabTask, rec.Root.ID, &tk)
		return ok && tk.member(who), err
	}
	if conn != nil && conn.Owner.Equal(who) {
		return true, nil
	}
	var root acRec
	if rec.Root.ID == rec.ID { // one the peer started is its own root
		root = *rec
	} else if ok, err := s.read(ctx, tabAC, rec.Root.ID, &root); err != nil {
		return false, err
	} else if ok {
		if c := s.conns[root.Conn]; c != nil && c.Owner.Equal(who) {
			return true, nil
		}
	}
	for _, m := range s.members {
		if m.Equal(who) {
			return true, nil
		}
	}
	return false, nil
}

// readable loads agent conversation id if who reads it, else ErrNotFound. A missing one costs
// what one who may not read costs: lookup reads the stand-in in its place, and it is authorized
// as a found record is, so the time of the uniform 404 does not tell the two apart (spec/peer.md,
// Reading).
func (s *Service) readable(ctx context.Context, who loomtype.Identity, id string) (acRec, error) {
	var rec acRec
	found, err := s.lookup(ctx, tabAC, id, standInAC, &rec)
	if err != nil {
		return acRec{}, err
	}
	if ok, err := s.mayRead(ctx, who, &rec); err != nil {
		return acRec{}, err
	} else if !ok || !found {
		return acRec{}, ErrNotFound
	}
	return rec, nil
}

// Stand-ins: one record of each kind a lookup may miss, stored when the service opens in
// tabStandIn, a table of their own, so that no id reaches one. Their ids (standInID) are none the
// service hands out.
const (
	standInNone   = "~none" // never written: the read of a lookup that found its record
	standInID     = "~standin"
	standInAC     = "ac"
	standInThread = "thread"
	standInTask   = "task"
	standInRun    = "run"
)

// standIns are the stand-in records by kind, shaped like small real ones.
func standIns() map[string]any {
	out := "~"
	return map[string]any{
		standInAC: acRec{ID: "ac_" + standInID, Conn: "~", Thread: "t_" + standInID + standInID, Role: "~", PeerRole: "~",
			StartedBy: startPeer, Root: Root{Kind: rootAgent, ID: "ac_" + standInID},
			Texts: []textRec{{Dir: dirIn, Message: "~", State: txReceived, Taken: 1}},
			Turns: []turnRec{{Turn: 1, Status: stCompleted, Texts: []string{"~"}, Output: &out, Exec: "~"}}},
		standInThread: "ac_" + standInID,
		standInTask: taskRec{ID: "tk_" + standInID, Title: "~", Owner: loomtype.Identity{Tenant: "~", Actor: "~"},
			Members: []loomtype.Identity{{Tenant: "~", Actor: "~"}}, State: TaskOpen},
		standInRun: runRec{ID: "tr_" + standInID, Task: "tk_" + standInID, Role: "~", Prompt: "~", Status: stCompleted, Output: &out, Exec: "~"},
	}
}

// writeStandIns stores the stand-ins that are not stored as they should be (once, on a new store).
func (s *Service) writeStandIns(ctx context.Context) error {
	want := map[string][]byte{}
	for kind, v := range standIns() {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if have, ok, err := tabStandIn.Get(ctx, s.k, kind); err != nil {
			return err
		} else if !ok || !bytes.Equal(have, b) {
			want[kind] = b
		}
	}
	if len(want) == 0 {
		return nil
	}
	return s.k.Update(ctx, func(tx *kernel.Tx) error {
		for k, b := range want {
			if err := tabStandIn.Put(tx, k, b); err != nil {
				return err
			}
		}
		return nil
	})
}

// lookup reads the record under key of t into v and reports whether it was there. Found or not, it
// does the same work: one store read that finds a row, one that finds none, one record decoded.
// When key holds nothing, v holds the stand-in of kind, which the caller authorizes as it would
// the record before answering ErrNotFound.
func (s *Service) lookup(ctx context.Context, t table, key, kind string, v any) (bool, error) {
	found, err := s.read(ctx, t, key, v)
	if err != nil {
		return false, err
	}
	other := standInNone
	if !found {
		other = kind
	}
	if _, err := s.read(ctx, tabStandIn, other, v); err != nil {
		return false, err
	}
	return found, nil
}

// Get reads agent conversation id.
//
// Errors: ErrNotFound (also for one who may not read it), store errors.
//
//	v, err := svc.Get(ctx, dana, "ac_x")
func (s *Service) Get(ctx context.Context, who loomtype.Identity, id string) (View, error) {
	rec, err := s.readable(ctx, who, id)
	if err != nil {
		return View{}, err
	}
	return rec.view(), nil
}

// Find reads the agent conversation of thread on connection.
//
// Errors: ErrNotFound (also for one who may not read it), store errors.
//
//	v, err := svc.Find(ctx, dana, "lab", "t_8fK2aaaaaaaaaaaa")
func (s *Service) Find(ctx context.Context, who loomtype.Identity, connection, thread string) (View, error) {
	var id string
	if _, err := s.lookup(ctx, tabThread, connection+"/"+thread, standInThread, &id); err != nil {
		return View{}, err
	}
	return s.Get(ctx, who, id) // an unknown thread (the stand-in's id) takes the same way to the uniform 404
}

// Stop stops the running turn of agent conversation id: it ends stopped, the texts it took
// count as handled, and the next turn is told. With no running turn it reports false and
// changes nothing.
//
// Errors: ErrNotFound (also for one who may not read it), kernel and store errors.
//
//	stopped, err := svc.Stop(ctx, dana, "ac_x")
func (s *Service) Stop(ctx context.Context, who loomtype.Identity, id string) (bool, error) {
	if _, err := s.readable(ctx, who, id); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rec acRec
	if ok, err := s.read(ctx, tabAC, id, &rec); err != nil || !ok {
		return false, err
	}
	stopped, err := s.stopTurn(ctx, &rec, stStopped)
	if err != nil || !stopped {
		return false, err
	}
	return true, s.k.Update(ctx, func(tx *kernel.Tx) error { return put(tx, tabAC, id, rec) })
}

// stopTurn cancels rec's running turn and marks it as status (stopped or ended) in rec, which
// the caller then stores; false when no turn runs (or it ended on its own first). It writes to
// the kernel, so it is called with s.mu held and outside any store transaction.
func (s *Service) stopTurn(ctx context.Context, rec *acRec, status string) (bool, error) {
	t := rec.running()
	if t == nil {
		return false, nil
	}
	if ok, err := s.cancelExec(ctx, t.Exec); err != nil || !ok {
		return false, err
	}
	t.Status = status
	if status == stStopped {
		rec.Stopped = true
	}
	return true, nil
}

// cancelExec cancels a turn execution; false when it had ended already.
func (s *Service) cancelExec(ctx context.Context, exec string) (bool, error) {
	err := s.k.Cancel(ctx, exec, "stopped")
	switch {
	case err == nil, errors.Is(err, loomtype.ErrNotFound):
		return true, nil
	case errors.Is(err, kernel.ErrEnded):
		return false, nil
	}
	return false, err
}

// connection returns the connection if who owns it, else ErrNotFound.
func (s *Service) connection(who loomtype.Identity, id string) (*Connection, error) {
	c := s.conns[id]
	if c == nil || !who.Valid() || !c.Owner.Equal(who) {
		return nil, ErrNotFound
	}
	return c, nil
}

// Connection reads connection id.
//
// Errors: ErrNotFound for anyone but its owner, store errors.
//
//	v, err := svc.Connection(ctx, olga, "lab")
func (s *Service) Connection(ctx context.Context, who loomtype.Identity, id string) (ConnectionView, error) {
	if _, err := s.connection(who, id); err != nil {
		return ConnectionView{}, err
	}
	var c connRec
	ok, err := s.read(ctx, tabConn, id, &c)
	if err != nil {
		return ConnectionView{}, err
	}
	if !ok {
		c.State = connOpen
	}
	return ConnectionView{ID: id, State: c.State}, nil
}

// Pause pauses connection id: every running turn of its agent conversations is stopped, every
// text waiting to be sent on it fails with reason paused, and until Unpause sends answer paused
// and the peer's texts are rejected with paused. Pausing a paused connection changes nothing.
//
// Errors: ErrNotFound for anyone but its owner, ErrRevoked, kernel and store errors.
//
//	v, err := svc.Pause(ctx, olga, "lab")
func (s *Service) Pause(ctx context.Context, who loomtype.Identity, id string) (ConnectionView, error) {
	return s.setState(ctx, who, id, connPaused)
}

// Unpause opens a paused connection again; nothing restarts until the next text.
//
// Errors: ErrNotFound for anyone but its owner, ErrRevoked, store errors.
//
//	v, err := svc.Unpause(ctx, olga, "lab")
func (s *Service) Unpause(ctx context.Context, who loomtype.Identity, id string) (ConnectionView, error) {
	return s.setState(ctx, who, id, connOpen)
}

// Revoke revokes connection id for good: the peer's texts are rejected with connection, sends
// answer connection, texts waiting fail with connection, running turns are stopped.
//
// Errors: ErrNotFound for anyone but its owner, kernel and store errors.
//
//	v, err := svc.Revoke(ctx, olga, "lab")
func (s *Service) Revoke(ctx context.Context, who loomtype.Identity, id string) (ConnectionView, error) {
	return s.setState(ctx, who, id, connRevoked)
}

func (s *Service) setState(ctx context.Context, who loomtype.Identity, id, state string) (ConnectionView, error) {
	if _, err := s.connection(who, id); err != nil {
		return ConnectionView{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return ConnectionView{}, err
	}
	var c connRec
	if ok, err := s.read(ctx, tabConn, id, &c); err != nil {
		return ConnectionView{}, err
	} else if !ok {
		c.State = connOpen
	}
	if c.State == connRevoked && state != connRevoked {
		return ConnectionView{}, ErrRevoked
	}
	if c.State == state {
		return ConnectionView{ID: id, State: state}, nil
	}
	reason := ReasonPaused
	if state == connRevoked {
		reason = ReasonConnection
	}
	dropped := 0
	var changed []acRec
	for i := range recs {
		rec := &recs[i]
		if rec.Conn != id || state == connOpen {
			continue
		}
		stopped, err := s.stopTurn(ctx, rec, stStopped)
		if err != nil {
			return ConnectionView{}, err
		}
		n := failQueued(rec, reason)
		dropped += n
		if stopped || n > 0 {
			changed = append(changed, *rec)
		}
	}
	err = s.k.Update(ctx, func(tx *kernel.Tx) error {
		if err := put(tx, tabConn, id, connRec{State: state}); err != nil {
			return err
		}
		for _, rec := range changed {
			if err := put(tx, tabAC, rec.ID, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ConnectionView{}, err
	}
	s.queued[id] -= dropped
	return ConnectionView{ID: id, State: state}, nil
}

// endRoot ends the running turns of every agent conversation in recs rooted in root (s.mu
// held, outside any transaction); closeRoot then records them closed.
func (s *Service) endRoot(ctx context.Context, recs []acRec, root Root) error {
	for i := range recs {
		if recs[i].Root == root && !recs[i].Gone {
			if _, err := s.stopTurn(ctx, &recs[i], stEnded); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeRoot closes every agent conversation in recs rooted in root (s.mu held, in tx, after
// endRoot): the root reads as gone, later texts are rejected with thread, and texts still
// waiting to be sent fail with thread (counted per connection in dropped).
func (s *Service) closeRoot(tx *kernel.Tx, recs []acRec, root Root, dropped map[string]int) error {
	for i := range recs {
		rec := &recs[i]
		if rec.Root != root || rec.Gone {
			continue
		}
		n, err := s.closeSide(tx, rec, ReasonThread)
		if err != nil {
			return err
		}
		dropped[rec.Conn] += n
		rec.Gone = true
		if err := put(tx, tabAC, rec.ID, *rec); err != nil {
			return err
		}
	}
	return nil
}

// List returns every agent conversation who reads, oldest id first (ids are random, so the
// order is only stable).
//
// Errors: store errors.
//
//	vs, err := svc.List(ctx, dana)
func (s *Service) List(ctx context.Context, who loomtype.Identity) ([]View, error) {
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return nil, err
	}
	out := []View{}
	for i := range recs {
		ok, err := s.mayRead(ctx, who, &recs[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, recs[i].view())
		}
	}
	return out, nil
}

// History is a role's agent history with one peer role: every agent conversation between
// role and peer ("connection/role") on that connection, open or closed and whatever its root
// (gone included), by thread id. Only the role itself reads it, with its role token.
//
// Errors: ErrNotFound for anyone but the role's own token (and for a connection the box does not
// have), a *loomtype.BadRequestError naming peer when it is not connection/role, store errors.
//
//	vs, err := svc.History(ctx, loomtype.Identity{Actor: "role:planner"}, "planner", "lab/analyst")
func (s *Service) History(ctx context.Context, who loomtype.Identity, role, peer string) ([]View, error) {
	if r, ok := s.roleOf(who); !ok || r != role || s.roles[role].Name == "" {
		return nil, ErrNotFound
	}
	cid, peerRole, ok := strings.Cut(peer, "/")
	if !ok || !ValidName(cid) || !ValidName(peerRole) {
		return nil, &loomtype.BadRequestError{Field: "peer"}
	}
	if s.conns[cid] == nil {
		return nil, ErrNotFound
	}
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return nil, err
	}
	out := []View{}
	for i := range recs {
		if r := &recs[i]; r.Conn == cid && r.Role == role && r.PeerRole == peerRole {
			out = append(out, r.view())
		}
	}
	slices.SortFunc(out, func(a, b View) int { return strings.Compare(a.Thread, b.Thread) })
	return out, nil
}
