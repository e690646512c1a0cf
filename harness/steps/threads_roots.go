package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// opensConversation makes or returns who's conversation with the role.
func (s *threadsSteps) opensConversation(who, role string) error {
	r, err := s.request(who, http.MethodPost, "/roles/"+role+"/conversation", nil, reqOpts{})
	if err != nil {
		return err
	}
	var body struct {
		ID     string          `json:"id"`
		Role   string          `json:"role"`
		Person json.RawMessage `json:"person"`
	}
	if r.Status != http.StatusOK {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 {id, role, person}")
	}
	if err := r.JSON(&body); err != nil {
		return err
	}
	if body.ID == "" || body.Role != role || !s.isPerson(body.Person, who) {
		return fail(r.Op, string(r.Body), fmt.Sprintf("an id, role %q and person %s", role, who))
	}
	key := "conv " + who + " " + role
	if old, ok := s.bound[key]; ok && old != body.ID {
		return fail(r.Op, "another conversation "+body.ID, "the one there is: "+old)
	}
	s.bound[key] = body.ID
	return nil
}

// threadsRootsVocabulary lists the steps of features/threads/roots.feature.
func threadsRootsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^` + namePat + ` opens (?:her|his) conversation with "([a-z0-9-]+)"$`, a.threads.opensConversation, "makes or returns who's conversation with the role; the first one is remembered, later ones must be the same"},
		{`^` + namePat + ` creates task "([^"]+)" titled ` + quotedPat + `(?: with members "([^"]*)")?$`, a.threads.createsTask, "creates a task with the title and the members (comma-separated names) and remembers its id"},
		{`^` + namePat + ` creates subtask "([^"]+)" of "([^"]+)" titled ` + quotedPat + `$`, a.threads.createsSubtask, "creates a subtask of the task and remembers its id"},
		{`^` + namePat + ` (reads|finishes|deletes) task "([^"]+)"$`, a.threads.taskOp, "reads, finishes or deletes the task as who"},
		{`^` + namePat + ` (adds|removes) "([^"]+)" (?:to|from) task "([^"]+)"$`, a.threads.taskMembers, "adds or removes a member of the task"},
		{`^` + namePat + ` starts a run of "([a-z0-9-]+)" on task "([^"]+)" with ` + quotedPat + `$`, a.threads.startsTaskRun, "starts a run of the role on the task with the prompt"},
	}
}

// createsTask creates a task with the title and members.
func (s *threadsSteps) createsTask(who, alias, title, list string) error {
	s.ready()
	return s.createTask(who, alias, title, list, "")
}

// createsSubtask creates a subtask of the task.
func (s *threadsSteps) createsSubtask(who, alias, parent, title string) error {
	id, err := s.taskID(parent)
	if err != nil {
		return err
	}
	return s.createTask(who, alias, title, "", id)
}

// taskMembers adds or removes a member of the task.
func (s *threadsSteps) taskMembers(who, op, person, alias string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	p, err := s.personJSON(person)
	if err != nil {
		return err
	}
	key := map[string]string{"adds": "add", "removes": "remove"}[op]
	body := map[string]any{"add": []any{}, "remove": []any{}}
	body[key] = []any{p}
	s.probe(who, http.MethodPost, "/tasks/no-such-task/members", body)
	_, err = s.request(who, http.MethodPost, "/tasks/"+id+"/members", body, reqOpts{})
	return err
}

// taskOp reads, finishes or deletes the task as who.
func (s *threadsSteps) taskOp(who, op, alias string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	method, tail := http.MethodGet, ""
	switch op {
	case "finishes":
		method, tail = http.MethodPost, "/finish"
	case "deletes":
		method = http.MethodDelete
	}
	s.probe(who, method, "/tasks/no-such-task"+tail, nil)
	_, err = s.request(who, method, "/tasks/"+id+tail, nil, reqOpts{})
	return err
}

// startsTaskRun starts a run of the role on the task.
func (s *threadsSteps) startsTaskRun(who, role, alias, prompt string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	r, err := s.request(who, http.MethodPost, "/tasks/"+id+"/runs", map[string]string{"role": role, "prompt": unescape(prompt)}, reqOpts{})
	if err != nil {
		return err
	}
	var got struct {
		Run string `json:"run"`
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202 {run}")
	}
	if err := r.JSON(&got); err != nil {
		return err
	}
	if got.Run == "" {
		return fail(r.Op, string(r.Body), "202 {run}")
	}
	s.bound["run "+alias] = got.Run
	return nil
}
