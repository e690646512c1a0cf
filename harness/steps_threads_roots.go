package harness

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
	if r.status != http.StatusOK {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 {id, role, person}")
	}
	if err := r.json(&body); err != nil {
		return err
	}
	if body.ID == "" || body.Role != role || !s.isPerson(body.Person, who) {
		return fail(r.op, string(r.body), fmt.Sprintf("an id, role %q and person %s", role, who))
	}
	key := "conv " + who + " " + role
	if old, ok := s.bound[key]; ok && old != body.ID {
		return fail(r.op, "another conversation "+body.ID, "the one there is: "+old)
	}
	s.bound[key] = body.ID
	return nil
}

// threadsRootsVocabulary lists the steps of features/threads/roots.feature.
func threadsRootsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^` + namePat + ` opens (?:her|his) conversation with "([a-z0-9-]+)"$`, a.threads.opensConversation, "makes or returns who's conversation with the role; the first one is remembered, later ones must be the same"},
	}
}
