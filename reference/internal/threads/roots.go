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

// CreateTask makes a task owned by who, with who and members as its members; a parent (a task
// who is a member of) makes it a subtask.
//
// Errors: ErrNotFound (a role token, a parent who does not read), a *loomtype.BadRequestError
// naming title or members, store errors.
//
//	v, err := svc.CreateTask(ctx, dana, "Move the lab", []loomtype.Identity{olga}, "")
func (s *Service) CreateTask(ctx context.Context, who loomtype.Identity, title string, members []loomtype.Identity, parent string) (TaskView, error) {
	return s.CreateTaskOnce(ctx, who, title, members, parent, "")
}

// CreateTaskOnce is CreateTask under who's client key (none when empty): the first call with the
// key makes the task and records its answer in the same transaction; every later one answers the
// same, durably, and makes nothing.
//
// Errors: those of CreateTask.
//
//	v, err := svc.CreateTaskOnce(ctx, dana, "Move the lab", nil, "", "k-1")
func (s *Service) CreateTaskOnce(ctx context.Context, who loomtype.Identity, title string, members []loomtype.Identity, parent, key string) (TaskView, error) {
	if !s.person(who) {
		return TaskView{}, ErrNotFound
	}
	if title == "" {
		return TaskView{}, loomtype.BadRequest("title", "")
	}
	ms := []loomtype.Identity{who}
	for _, m := range members {
		if !m.Valid() {
			return TaskView{}, loomtype.BadRequest("members", "")
		}
		if !slices.ContainsFunc(ms, m.Equal) {
			ms = append(ms, m)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := taskRec{ID: randomID("tk_", 12), Title: title, Owner: who, Members: ms, Parent: parent, State: TaskOpen}
	var first TaskView
	ix := idemIndex(idemTask, who, "", key)
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		first = TaskView{}
		if ok, err := firstAnswer(tx, ix, &first); err != nil || ok {
			return err
		}
		if err := keepAnswer(tx, ix, tk.view()); err != nil {
			return err
		}
		if parent != "" {
			var p taskRec
			if ok, err := get(tx, tabTask, parent, &p); err != nil {
				return err
			} else if !ok || !p.member(who) {
				return ErrNotFound
			}
			p.Subtasks = append(p.Subtasks, tk.ID)
			if err := put(tx, tabTask, parent, p); err != nil {
				return err
			}
		}
		return put(tx, tabTask, tk.ID, tk)
	})
	if err != nil {
		return TaskView{}, err
	}
	if first.ID != "" {
		return first, nil
	}
	return tk.view(), nil
}

// task loads task id if who is a member, else ErrNotFound.
func (s *Service) task(ctx context.Context, who loomtype.Identity, id string) (taskRec, error) {
	var tk taskRec
	if !s.person(who) {
		return tk, ErrNotFound
	}
	ok, err := s.lookup(ctx, tabTask, id, standInTask, &tk) // the work of a task found, missing or not
	if err != nil {
		return taskRec{}, err
	}
	if !tk.member(who) || !ok {
		return taskRec{}, ErrNotFound
	}
	return tk, nil
}

// Task reads task id.
//
// Errors: ErrNotFound for anyone but its members, store errors.
//
//	v, err := svc.Task(ctx, dana, "tk_x")
func (s *Service) Task(ctx context.Context, who loomtype.Identity, id string) (TaskView, error) {
	tk, err := s.task(ctx, who, id)
	return tk.view(), err
}

// ChangeMembers adds and removes members of task id (its owner stays a member).
//
// Errors: ErrNotFound for anyone but its members, ErrNotOwner for a member who does not own
// it, a *loomtype.BadRequestError naming add or remove, store errors.
//
//	v, err := svc.ChangeMembers(ctx, dana, "tk_x", []loomtype.Identity{olga}, nil)
func (s *Service) ChangeMembers(ctx context.Context, who loomtype.Identity, id string, add, remove []loomtype.Identity) (TaskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, err := s.task(ctx, who, id)
	if err != nil {
		return TaskView{}, err
	}
	if !tk.Owner.Equal(who) {
		return TaskView{}, ErrNotOwner
	}
	for _, m := range add {
		if !m.Valid() {
			return TaskView{}, loomtype.BadRequest("add", "")
		}
		if !slices.ContainsFunc(tk.Members, m.Equal) {
			tk.Members = append(tk.Members, m)
		}
	}
	for _, m := range remove {
		if !m.Valid() {
			return TaskView{}, loomtype.BadRequest("remove", "")
		}
		if !m.Equal(tk.Owner) {
			tk.Members = slices.DeleteFunc(tk.Members, m.Equal)
		}
	}
	err = s.k.Update(ctx, func(tx *kernel.Tx) error { return put(tx, tabTask, id, tk) })
	return tk.view(), err
}

// FinishTask marks task id finished; its agent conversations stay open.
//
// Errors: ErrNotFound for anyone but its members, store errors.
//
//	v, err := svc.FinishTask(ctx, dana, "tk_x")
func (s *Service) FinishTask(ctx context.Context, who loomtype.Identity, id string) (TaskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, err := s.task(ctx, who, id)
	if err != nil {
		return TaskView{}, err
	}
	tk.State = TaskFinished
	err = s.k.Update(ctx, func(tx *kernel.Tx) error { return put(tx, tabTask, id, tk) })
	return tk.view(), err
}

// DeleteTask deletes task id and its subtasks: their runs end, their agent conversations close.
//
// Errors: ErrNotFound for anyone but its members, ErrNotOwner for a member who does not own it,
// kernel and store errors.
//
//	err := svc.DeleteTask(ctx, dana, "tk_x")
func (s *Service) DeleteTask(ctx context.Context, who loomtype.Identity, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, err := s.task(ctx, who, id)
	if err != nil {
		return err
	}
	if !tk.Owner.Equal(who) {
		return ErrNotOwner
	}
	// Gather the task and its subtasks, depth first (bounded by what the store holds).
	var doomed []taskRec
	queue := []taskRec{tk}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		doomed = append(doomed, t)
		for _, sub := range t.Subtasks {
			var st taskRec
			if ok, err := s.read(ctx, tabTask, sub, &st); err != nil {
				return err
			} else if ok {
				queue = append(queue, st)
			}
		}
	}
	runs, err := all[runRec](ctx, s.k, tabRun)
	if err != nil {
		return err
	}
	recs, err := all[acRec](ctx, s.k, tabAC)
	if err != nil {
		return err
	}
	var endedRuns []runRec
	for _, t := range doomed {
		for _, r := range runs {
			if r.Task == t.ID && r.Status == stRunning {
				if _, err := s.cancelExec(ctx, r.Exec); err != nil {
					return err
				}
				r.Status = stEnded
				endedRuns = append(endedRuns, r)
			}
		}
		if err := s.endRoot(ctx, recs, Root{Kind: rootTask, ID: t.ID}); err != nil {
			return err
		}
	}
	dropped := map[string]int{}
	err = s.k.Update(ctx, func(tx *kernel.Tx) error {
		clear(dropped)
		for _, r := range endedRuns {
			if err := put(tx, tabRun, r.ID, r); err != nil {
				return err
			}
		}
		for _, t := range doomed {
			if err := del(tx, tabTask, t.ID); err != nil {
				return err
			}
			if err := s.closeRoot(tx, recs, Root{Kind: rootTask, ID: t.ID}, dropped); err != nil {
				return err
			}
		}
		if tk.Parent != "" {
			var p taskRec
			if ok, err := get(tx, tabTask, tk.Parent, &p); err != nil {
				return err
			} else if ok {
				p.Subtasks = slices.DeleteFunc(p.Subtasks, func(x string) bool { return x == tk.ID })
				return put(tx, tabTask, p.ID, p)
			}
		}
		return nil
	})
	if err == nil {
		for c, n := range dropped {
			s.queued[c] -= n
		}
	}
	return err
}

// StartRun starts a run of role on task id with prompt.
//
// Errors: ErrNotFound (not a member, a role the box does not have), a
// *loomtype.BadRequestError naming role or prompt, store errors.
//
//	runID, err := svc.StartRun(ctx, dana, "tk_x", "planner", "find a van")
func (s *Service) StartRun(ctx context.Context, who loomtype.Identity, id, role, prompt string) (string, error) {
	return s.StartRunOnce(ctx, who, id, role, prompt, "")
}

// StartRunOnce is StartRun under who's client key (none when empty), scoped to the task: the first
// call with the key starts the run and records its answer in the same transaction; every later
// one answers the same, durably, and starts nothing.
//
// Errors: those of StartRun.
//
//	runID, err := svc.StartRunOnce(ctx, dana, "tk_x", "planner", "find a van", "k-1")
func (s *Service) StartRunOnce(ctx context.Context, who loomtype.Identity, id, role, prompt, key string) (string, error) {
	tk, err := s.task(ctx, who, id)
	if err != nil {
		return "", err
	}
	if _, ok := s.roles[role]; !ok {
		return "", ErrNotFound
	}
	if prompt == "" {
		return "", loomtype.BadRequest("prompt", "")
	}
	r := runRec{ID: randomID("tr_", 12), Task: id, Role: role, Prompt: prompt, Status: stRunning}
	r.Exec = execID(kindTask, r.ID, 1)
	req := startReq{kind: kindTask, ref: r.ID, exec: r.Exec, in: turnInput{Kind: kindTask, Ref: r.ID, Turn: 1, Role: role,
		Root: Root{Kind: rootTask, ID: id}, Messages: TaskRequest(s.roles[role].Prompt, tk.ID, tk.Title, prompt)}}
	s.mu.Lock()
	var first string
	ix := idemIndex(idemRun, who, id, key)
	err = s.k.Update(ctx, func(tx *kernel.Tx) error {
		first = ""
		if ok, err := firstAnswer(tx, ix, &first); err != nil || ok {
			return err
		}
		if err := keepAnswer(tx, ix, r.ID); err != nil {
			return err
		}
		if err := stage(tx, req); err != nil {
			return err
		}
		return put(tx, tabRun, r.ID, r)
	})
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	if first != "" {
		return first, nil
	}
	s.launch(s.ctx, req)
	return r.ID, nil
}

func (s *Service) finishRun(tx *kernel.Tx, id, exec, status string, output *string) error {
	var r runRec
	if ok, err := get(tx, tabRun, id, &r); err != nil || !ok || r.Status != stRunning || r.Exec != exec {
		return err
	}
	r.Status, r.Output = status, output
	return put(tx, tabRun, id, r)
}

// Run reads task run id.
//
// Errors: ErrNotFound for anyone but its task's members (and once the task is gone), store
// errors.
//
//	v, err := svc.Run(ctx, dana, "tr_x")
func (s *Service) Run(ctx context.Context, who loomtype.Identity, id string) (RunView, error) {
	var r runRec
	found, err := s.lookup(ctx, tabRun, id, standInRun, &r) // a missing one asks the stand-in's task
	if err != nil {
		return RunView{}, err
	}
	if _, err := s.task(ctx, who, r.Task); err != nil || !found {
		return RunView{}, errors.Join(err, notFoundIf(err == nil))
	}
	return RunView{ID: r.ID, Task: r.Task, Role: r.Role, Status: r.Status, Output: r.Output}, nil
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
