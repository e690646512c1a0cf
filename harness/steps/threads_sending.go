package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// roleDoor sends through the role's own door with its role token, in the run on the task when
// one is named.
func (s *threadsSteps) roleDoor(role, txt, to, task string) error {
	body := map[string]string{"to": to, "text": unescape(txt)}
	if task != "" {
		s.ready()
		id, ok := s.bound["run "+task]
		if !ok {
			return harnessErr("no run was started on task %q", task)
		}
		body["run"] = id
	}
	_, err := s.request("role:"+role, http.MethodPost, "/roles/"+role+"/send", body, reqOpts{})
	return err
}

// runIs waits until the run on the task, as who reads it, has the status.
func (s *threadsSteps) runIs(who, task, status string) error {
	s.ready()
	id, ok := s.bound["run "+task]
	if !ok {
		return harnessErr("no run was started on task %q", task)
	}
	var last *response
	done, err := s.poll(1, func() (bool, error) {
		r, err := s.request(who, http.MethodGet, "/threads/runs/"+url.PathEscape(id), nil, reqOpts{Quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		var got struct {
			Status string `json:"status"`
		}
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &got) == nil && got.Status == status, nil
	})
	if err != nil {
		return err
	}
	if !done {
		return fail(last.Op+" as "+who, fmt.Sprintf("%d %s", last.Status, clip(string(last.Body), 200)), "200 with status "+status)
	}
	return nil
}

// threadsSendingVocabulary lists the steps of features/threads/sending.feature.
func threadsSendingVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^turn (\d+) of "([^"]+)"'s conversation with "([a-z0-9-]+)" is (running|completed|stopped|failed|ended)$`, a.threads.personTurnIs, "waits until turn N of who's conversation with the role has the status"},
		{`^"role:([a-z0-9-]+)" sends ` + quotedPat + ` to "([^"]+)" through its own door(?: in the run on task "([^"]+)")?$`, a.threads.roleDoor, "sends through the role's own door with its role token, naming the run on the task when given"},
		{`^` + namePat + ` sees the run on task "([^"]+)" (running|completed|stopped|failed|ended)$`, a.threads.runIs, "waits until the run started on the task, as who reads it, has the status"},
	}
}

// personTurnIs waits until turn n of who's conversation with the role has the status: a
// person's turn runs after its 202, so a read of the whole conversation waits for it first.
func (s *threadsSteps) personTurnIs(n int, who, role, status string) error {
	var seen string
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request(who, http.MethodGet, "/roles/"+role+"/conversation", nil, reqOpts{})
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 300))
		var body struct {
			Turns []struct {
				Turn   int    `json:"turn"`
				Status string `json:"status"`
			} `json:"turns"`
		}
		if r.Status != http.StatusOK || r.JSON(&body) != nil {
			return false, nil
		}
		return len(body.Turns) >= n && body.Turns[n-1].Turn == n && body.Turns[n-1].Status == status, nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(fmt.Sprintf("GET /roles/%s/conversation as %s", role, who), seen, fmt.Sprintf("turn %d %s", n, status))
	}
	return nil
}
