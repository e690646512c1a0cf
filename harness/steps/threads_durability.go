package steps

import (
	"fmt"
	"net/http"
)

// takenOnce waits until a turn that took the text completed and expects no other took it.
func (s *threadsSteps) takenOnce(txt, alias string) error {
	msg, ok := s.bound["message "+unescape(txt)]
	if !ok {
		return harnessErr("the peer did not send %q", txt)
	}
	var seen string
	var count int
	done, err := s.poll(1, func() (bool, error) {
		ac, err := s.agentConversation(alias)
		if err != nil {
			return false, err
		}
		seen, count = fmt.Sprintf("%+v", ac.Turns), 0
		completed := false
		for _, t := range ac.Turns {
			for _, m := range t.Texts {
				if m == msg {
					count++
					completed = completed || t.Status == "completed"
				}
			}
		}
		return completed, nil
	})
	if err != nil {
		return err
	}
	if !done || count != 1 {
		return fail(fmt.Sprintf("the turns of thread %s", alias), seen, fmt.Sprintf("exactly one turn that took %s, completed", msg))
	}
	return nil
}

// saysUnderKey runs a turn in who's conversation with the role under a client key.
func (s *threadsSteps) saysUnderKey(who, txt, role, key string) error {
	s.ready()
	if _, ok := s.bound["conv "+who+" "+role]; !ok {
		if err := s.opensConversation(who, role); err != nil {
			return err
		}
	}
	_, err := s.request(who, http.MethodPost, "/roles/"+role+"/conversation/messages", map[string]string{"text": unescape(txt)},
		reqOpts{Headers: map[string]string{"Idempotency-Key": s.own(key)}})
	return err
}

// createsTaskUnderKey creates a task under a client key; the task's alias is bound by the
// placeholder of the step that checks the answer.
func (s *threadsSteps) createsTaskUnderKey(who, title, key string) error {
	s.ready()
	_, err := s.request(who, http.MethodPost, "/tasks", map[string]any{"title": unescape(title)}, reqOpts{Headers: map[string]string{"Idempotency-Key": s.own(key)}})
	return err
}

// startsRunUnderKey starts a run on the task under a client key.
func (s *threadsSteps) startsRunUnderKey(who, role, alias, prompt, key string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	_, err = s.request(who, http.MethodPost, "/tasks/"+id+"/runs", map[string]string{"role": role, "prompt": unescape(prompt)},
		reqOpts{Headers: map[string]string{"Idempotency-Key": s.own(key)}})
	return err
}

// threadsDurabilityVocabulary lists the steps of features/threads/durability.feature.
func threadsDurabilityVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the text ` + quotedPat + ` on thread "([^"]+)" was taken by exactly one turn, which completed$`, a.threads.takenOnce, "waits until a turn that took the text completed, and expects no other turn to have taken it"},
		{`^"([^"]+)" says ` + quotedPat + ` to "([a-z0-9-]+)" under key "([^"]+)"$`, a.threads.saysUnderKey, "runs a turn in who's conversation with the role under the Idempotency-Key, opening the conversation first when the scenario has not; the answer is left to the next step"},
		{`^"([^"]+)" creates task "[^"]+" titled ` + quotedPat + ` under key "([^"]+)"$`, a.threads.createsTaskUnderKey, "creates a task with the title under the Idempotency-Key; the answer (and the task's id) is left to the next step"},
		{`^"([^"]+)" starts a run of "([a-z0-9-]+)" on task "([^"]+)" with ` + quotedPat + ` under key "([^"]+)"$`, a.threads.startsRunUnderKey, "starts a run of the role on the task with the prompt under the Idempotency-Key; the answer is left to the next step"},
	}
}
