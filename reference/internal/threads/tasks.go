package threads

import (
	"context"
	"errors"
	"slices"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

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
	doomed, err := s.taskTree(ctx, tk)
	if err != nil {
		return err
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

// taskTree gathers task tk and its subtasks, depth first (bounded by what the store holds; s.mu
// held).
func (s *Service) taskTree(ctx context.Context, tk taskRec) ([]taskRec, error) {
	var doomed []taskRec
	queue := []taskRec{tk}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		doomed = append(doomed, t)
		for _, sub := range t.Subtasks {
			var st taskRec
			if ok, err := s.read(ctx, tabTask, sub, &st); err != nil {
				return nil, err
			} else if ok {
				queue = append(queue, st)
			}
		}
	}
	return doomed, nil
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
