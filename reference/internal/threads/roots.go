package threads

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// ErrNotOwner: the caller reads the task but does not own it (only its owner changes its
// members or deletes it).
var ErrNotOwner = errors.New("threads: only the task's owner may do that")

// ConversationView is a person's conversation with a role as its person reads it.
type ConversationView struct {
	ID     string            `json:"id"`
	Role   string            `json:"role"`
	Person loomtype.Identity `json:"person"`
	// Turns are on reads only.
	Turns []ExchangeView `json:"turns,omitempty"`
}

// ExchangeView is one turn of a person's conversation: its text, status and answer.
type ExchangeView struct {
	Turn   int     `json:"turn"`
	Text   string  `json:"text"`
	Status string  `json:"status"`
	Output *string `json:"output,omitempty"`
}

// TaskView is a task as its members read it.
type TaskView struct {
	ID      string              `json:"id"`
	Title   string              `json:"title"`
	Owner   loomtype.Identity   `json:"owner"`
	Members []loomtype.Identity `json:"members"`
	Parent  string              `json:"parent,omitempty"`
	State   string              `json:"state"`
}

// RunView is a task run as the task's members read it.
type RunView struct {
	ID     string  `json:"id"`
	Task   string  `json:"task"`
	Role   string  `json:"role"`
	Status string  `json:"status"`
	Output *string `json:"output,omitempty"`
}

// Task states.
const (
	TaskOpen     = "open"
	TaskFinished = "finished"
)

func (t *taskRec) member(who loomtype.Identity) bool {
	return who.Valid() && slices.ContainsFunc(t.Members, who.Equal)
}

func (t *taskRec) view() TaskView {
	return TaskView{ID: t.ID, Title: t.Title, Owner: t.Owner, Members: append([]loomtype.Identity{}, t.Members...), Parent: t.Parent, State: t.State}
}

func (p *pcRec) view(turns bool) ConversationView {
	v := ConversationView{ID: p.ID, Role: p.Role, Person: p.Person}
	if turns {
		v.Turns = []ExchangeView{}
		for _, t := range p.Turns {
			v.Turns = append(v.Turns, ExchangeView{Turn: t.Turn, Text: t.Text, Status: t.Status, Output: t.Output})
		}
	}
	return v
}

func (s *Service) personRole(who loomtype.Identity, role string) error {
	if _, ok := s.roles[role]; !ok || !s.person(who) {
		return ErrNotFound
	}
	return nil
}

// OpenConversation makes who's conversation with role, or returns the one there is.
//
// Errors: ErrNotFound (a role token, a role the box does not have), store errors.
//
//	v, err := svc.OpenConversation(ctx, dana, "planner")
func (s *Service) OpenConversation(ctx context.Context, who loomtype.Identity, role string) (ConversationView, error) {
	if err := s.personRole(who, role); err != nil {
		return ConversationView{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var pc pcRec
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		var err error
		pc, err = s.conversation(tx, who, role, true)
		return err
	})
	return pc.view(false), err
}

// conversation loads who's conversation with role, making it when make is set (else
// ErrNotFound when there is none).
func (s *Service) conversation(tx *kernel.Tx, who loomtype.Identity, role string, make bool) (pcRec, error) {
	ix := role + "/" + identityKey(who)
	var id string
	var pc pcRec
	if ok, err := get(tx, tabPCIndex, ix, &id); err != nil {
		return pcRec{}, err
	} else if ok {
		if ok, err := get(tx, tabPC, id, &pc); err != nil || ok {
			return pc, err
		}
	}
	if !make {
		return pcRec{}, ErrNotFound
	}
	pc = pcRec{ID: randomID("pc_", 12), Role: role, Person: who, Turns: []pcTurn{}}
	if err := put(tx, tabPCIndex, ix, pc.ID); err != nil {
		return pcRec{}, err
	}
	return pc, put(tx, tabPC, pc.ID, pc)
}

// Converse runs a turn of who's conversation with role (made if there is none) on text: at once,
// or after the turns before it. It returns the conversation's id and the turn's number.
//
// Errors: ErrNotFound, a *loomtype.BadRequestError for an empty text, ErrBusy when
// MaxQueuedTurns wait already, store errors.
//
//	id, turn, err := svc.Converse(ctx, dana, "planner", "plan the move")
func (s *Service) Converse(ctx context.Context, who loomtype.Identity, role, text string) (string, int, error) {
	return s.ConverseOnce(ctx, who, role, text, "")
}

// ConverseOnce is Converse under who's client key (none when empty): the first call with the key
// runs the turn and records its answer in the same transaction; every later one answers the
// same, durably, and runs nothing.
//
// Errors: those of Converse.
//
//	id, turn, err := svc.ConverseOnce(ctx, dana, "planner", "plan the move", "k-1")
func (s *Service) ConverseOnce(ctx context.Context, who loomtype.Identity, role, text, key string) (string, int, error) {
	if err := s.personRole(who, role); err != nil {
		return "", 0, err
	}
	if text == "" {
		return "", 0, loomtype.BadRequest("text", "")
	}
	s.mu.Lock()
	var pc pcRec
	var next []startReq
	var first converseAnswer
	ix := idemIndex(idemConverse, who, role, key)
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		next, first = nil, converseAnswer{}
		if ok, err := firstAnswer(tx, ix, &first); err != nil || ok {
			return err
		}
		var err error
		if pc, err = s.conversation(tx, who, role, true); err != nil {
			return err
		}
		waiting := 0
		for _, t := range pc.Turns {
			if t.Status == stQueued {
				waiting++
			}
		}
		if waiting >= MaxQueuedTurns {
			return ErrBusy
		}
		n := len(pc.Turns) + 1
		pc.Turns = append(pc.Turns, pcTurn{Turn: n, Text: text, Status: stQueued, Exec: execID(kindPerson, pc.ID, n)})
		if r, err := s.nextPersonTurn(tx, &pc); err != nil {
			return err
		} else if r != nil {
			next = append(next, *r)
		}
		if err := keepAnswer(tx, ix, converseAnswer{Conversation: pc.ID, Turn: n}); err != nil {
			return err
		}
		return put(tx, tabPC, pc.ID, pc)
	})
	s.mu.Unlock()
	if err != nil {
		return "", 0, err
	}
	if first.Conversation != "" {
		return first.Conversation, first.Turn, nil
	}
	s.launch(s.ctx, next...)
	return pc.ID, len(pc.Turns), nil
}

// converseAnswer is the answer a client key of Converse was given first.
type converseAnswer struct {
	Conversation string `json:"conversation"`
	Turn         int    `json:"turn"`
}

// nextPersonTurn starts the first queued turn of pc when none runs.
func (s *Service) nextPersonTurn(tx *kernel.Tx, pc *pcRec) (*startReq, error) {
	for i := range pc.Turns {
		t := &pc.Turns[i]
		switch t.Status {
		case stRunning:
			return nil, nil
		case stQueued:
			t.Status = stRunning
			r := startReq{kind: kindPerson, ref: pc.ID, exec: t.Exec, in: turnInput{Kind: kindPerson, Ref: pc.ID, Turn: t.Turn,
				Role: pc.Role, Root: Root{Kind: rootConv, ID: pc.ID}, Person: personInput(pc, s.roles[pc.Role].Prompt, t.Turn)}}
			return &r, stage(tx, r)
		}
	}
	return nil, nil
}

func (s *Service) finishPerson(tx *kernel.Tx, id, exec, status string, output *string, next *[]startReq) error {
	var pc pcRec
	if ok, err := get(tx, tabPC, id, &pc); err != nil || !ok {
		return err
	}
	for i := range pc.Turns {
		t := &pc.Turns[i]
		if t.Exec == exec && t.Status == stRunning {
			t.Status, t.Output = status, output
			r, err := s.nextPersonTurn(tx, &pc)
			if err != nil {
				return err
			}
			if r != nil {
				*next = append(*next, *r)
			}
			return put(tx, tabPC, id, pc)
		}
	}
	return nil
}

// Conversation reads who's conversation with role.
//
// Errors: ErrNotFound (also when there is none), store errors.
//
//	v, err := svc.Conversation(ctx, dana, "planner")
func (s *Service) Conversation(ctx context.Context, who loomtype.Identity, role string) (ConversationView, error) {
	if err := s.personRole(who, role); err != nil {
		return ConversationView{}, err
	}
	var id string
	var pc pcRec
	if ok, err := s.read(ctx, tabPCIndex, role+"/"+identityKey(who), &id); err != nil || !ok {
		return ConversationView{}, errors.Join(err, notFoundIf(err == nil))
	}
	if ok, err := s.read(ctx, tabPC, id, &pc); err != nil || !ok {
		return ConversationView{}, errors.Join(err, notFoundIf(err == nil))
	}
	return pc.view(true), nil
}

func notFoundIf(b bool) error {
	if b {
		return ErrNotFound
	}
	return nil
}

// DeleteConversation deletes who's conversation with role: its running turn ends, and its
// agent conversations close (their history stays, their root reads as gone).
//
// Errors: ErrNotFound (also when there is none), kernel and store errors.
//
//	err := svc.DeleteConversation(ctx, dana, "planner")
func (s *Service) DeleteConversation(ctx context.Context, who loomtype.Identity, role string) error {
	if err := s.personRole(who, role); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := role + "/" + identityKey(who)
	var id string
	var pc pcRec
	if ok, err := s.read(ctx, tabPCIndex, ix, &id); err != nil || !ok {
		return errors.Join(err, notFoundIf(err == nil))
	}
	if ok, err := s.read(ctx, tabPC, id, &pc); err != nil || !ok {
		return errors.Join(err, notFoundIf(err == nil))
	}
	for _, t := range pc.Turns {
		if t.Status == stRunning {
			if _, err := s.cancelExec(ctx, t.Exec); err != nil {
				return err
			}
		}
	}
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return err
	}
	root := Root{Kind: rootConv, ID: pc.ID}
	if err := s.endRoot(ctx, recs, root); err != nil {
		return err
	}
	dropped := map[string]int{}
	err = s.k.Update(ctx, func(tx *kernel.Tx) error {
		clear(dropped)
		if err := del(tx, tabPCIndex, ix); err != nil {
			return err
		}
		if err := del(tx, tabPC, pc.ID); err != nil {
			return err
		}
		return s.closeRoot(tx, recs, root, dropped)
	})
	if err == nil {
		for c, n := range dropped {
			s.queued[c] -= n
		}
	}
	return err
}

// RoleSend is a role's own door: with its role token, the role sends text to to
// ("connection/role") in the agent conversation of the root of run, which must be a running
// task run of the role, as peer.send would (under a new message id). A role with no such run
// has no topic. The answer is a Sent, or a SendError naming why nothing was queued.
//
// Errors: ErrNotFound for anyone but role's own token, ErrNoTopic (run empty, not the role's,
// or not running), store errors.
//
//	v, err := svc.RoleSend(ctx, who, "planner", "lab/scout", "any news?", "tr_x")
func (s *Service) RoleSend(ctx context.Context, who loomtype.Identity, role, to, text, run string) (any, error) {
	if r, ok := s.roleOf(who); !ok || r != role || s.roles[role].Name == "" {
		return nil, ErrNotFound
	}
	if run == "" {
		return nil, ErrNoTopic
	}
	var r runRec
	if ok, err := s.read(ctx, tabRun, run, &r); err != nil {
		return nil, err
	} else if !ok || r.Role != role || r.Status != stRunning {
		return nil, ErrNoTopic
	}
	args, _ := json.Marshal(map[string]string{"to": to, "text": text})
	return s.Send(ctx, role, Root{Kind: rootTask, ID: r.Task}, args, randomID("m_", 18))
}

// UsesRole reports whether who is a person and role a role of the box: who may have a
// conversation with it.
//
//	if !svc.UsesRole(who, "planner") { notFound() }
func (s *Service) UsesRole(who loomtype.Identity, role string) bool {
	return s.personRole(who, role) == nil
}

// Person reports whether who may act as a person here (a valid identity that is no role token).
//
//	if !svc.Person(who) { notFound() }
func (s *Service) Person(who loomtype.Identity) bool { return s.person(who) }

// roleOf returns the role who is: the role the box issued who's exact identity to (Role.Principals).
// An actor spelled like a role ("role:planner") makes nobody a role.
func (s *Service) roleOf(who loomtype.Identity) (string, bool) {
	if !who.Valid() {
		return "", false
	}
	for _, r := range s.cfg.Roles {
		if slices.ContainsFunc(r.Principals, who.Equal) {
			return r.Name, true
		}
	}
	return "", false
}

// person reports whether who may act as a person (a valid identity that is no role of the box).
func (s *Service) person(who loomtype.Identity) bool {
	_, role := s.roleOf(who)
	return who.Valid() && !role
}
