package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// readsHistory reads the role's agent history with peer as who (the uniform 404's probe asks
// the same of a role nothing holds).
func (s *threadsSteps) readsHistory(who, role, peer string) error {
	s.ready()
	s.bound["history role"], s.bound["history peer"], s.bound["history reader"] = role, peer, who
	s.probe(who, http.MethodGet, historyPath("no-such-role", peer), nil)
	_, err := s.request(who, http.MethodGet, historyPath(role, peer), nil, reqOpts{})
	return err
}

// historyPath is the route of role's agent history with peer.
func historyPath(role, peer string) string {
	return "/roles/" + role + "/agent-history?peer=" + url.QueryEscape(peer)
}

// historyHolds checks the last answer, an agent history, against the threads named: the
// conversations of exactly those threads, sorted by the thread ids the kit chose or saw, each
// equal to what its role reads of it alone.
func (s *threadsSteps) historyHolds(list string) error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	var got struct {
		Role          string            `json:"role"`
		Peer          string            `json:"peer"`
		Conversations []json.RawMessage `json:"conversations"`
	}
	role, peer := s.bound["history role"], s.bound["history peer"]
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || got.Conversations == nil || got.Role != role || got.Peer != peer {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, r.Body), fmt.Sprintf("200 {role: %q, peer: %q, conversations}", role, peer))
	}
	type entry struct{ thread, alias string }
	var want []entry
	for _, m := range historyAliasRE.FindAllStringSubmatch(list, -1) {
		th, err := s.thread(m[1])
		if err != nil {
			return err
		}
		want = append(want, entry{th, m[1]})
	}
	sort.Slice(want, func(i, j int) bool { return want[i].thread < want[j].thread })
	if len(got.Conversations) != len(want) {
		return fail(r.Op, fmt.Sprintf("%d conversations: %s", len(got.Conversations), r.Body), fmt.Sprintf("%d", len(want)))
	}
	// The history and each conversation read alone are two reads; a conversation still moving
	// (a text delivered, a turn settling) may differ between them, so the two are read again
	// until one round agrees, and only a difference that never settles is the system's.
	var mismatch error
	ok, err := s.poll(1, func() (bool, error) {
		if mismatch != nil {
			again, err := s.ask(s.bound["history reader"], http.MethodGet, historyPath(role, peer), nil, reqOpts{Quiet: true})
			if err != nil {
				return false, err
			}
			if json.Unmarshal(again.Body, &got) != nil || len(got.Conversations) != len(want) {
				return false, fail(again.Op, fmt.Sprintf("%d %s", again.Status, again.Body), fmt.Sprintf("%d conversations", len(want)))
			}
		}
		mismatch = nil
		for i, e := range want {
			one, err := s.ask("role:"+role, http.MethodGet, byThread(e.thread), nil, reqOpts{Quiet: true})
			if err != nil {
				return false, err
			}
			if one.Status != http.StatusOK {
				return false, fail(one.Op, fmt.Sprintf("%d %s", one.Status, one.Body), "200")
			}
			if a, b := canonJSON(string(got.Conversations[i])), canonJSON(string(one.Body)); a != b {
				mismatch = fail(r.Op, fmt.Sprintf("conversation %d: %s", i+1, a), fmt.Sprintf("thread %q as its role reads it: %s", e.alias, b))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil || ok {
		return err
	}
	return mismatch
}

// canRead reads the agent conversation by id and by thread as who.
func (s *threadsSteps) canRead(who, can, alias string) error {
	id, err := s.acID(alias)
	if err != nil {
		return err
	}
	th, _ := s.thread(alias)
	missing := map[string]string{
		"/agent-conversations/" + url.PathEscape(id): "/agent-conversations/no-such-agent-conversation",
		byThread(th): byThread(randomID("t_", 18)),
	}
	for path, free := range missing {
		r, err := s.request(who, http.MethodGet, path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if can == "can" {
			if r.Status != http.StatusOK {
				return fail(r.Op+" as "+who, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200: "+who+" reads it")
			}
			var got struct {
				ID string `json:"id"`
			}
			if err := r.JSON(&got); err != nil || got.ID != id {
				return fail(r.Op, string(r.Body), "agent conversation "+id)
			}
			continue
		}
		s.probe(who, http.MethodGet, free, nil)
		if err := s.answerUniform404(); err != nil {
			return err
		}
	}
	return nil
}

// threadsVisibilityVocabulary lists the steps of features/threads/visibility.feature.
func threadsVisibilityVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^` + namePat + ` reads the agent history of "([a-z0-9-]+)" with "([^"]*)"$`, a.threads.readsHistory, "reads the role's agent history with the peer role (connection/role) as who"},
		{`^the agent history holds the agent conversations of (no thread|threads? .+)$`, a.threads.historyHolds, "expects the last answer to be 200 with every agent conversation of the threads (quoted aliases), sorted by thread id, each exactly as the role reads it alone"},
		{`^` + namePat + ` (can|cannot) read the agent conversation of thread "([^"]+)"$`, a.threads.canRead, "reads the agent conversation by id and by thread as who: 200, or the uniform 404 a missing one gets"},
		{`^` + namePat + ` sees thread "([^"]+)" rooted "gone"$`, a.threads.seesGone, "reads the agent conversation as who and expects 200 with root kind gone"},
	}
}

// seesGone reads the agent conversation as who and expects root kind gone.
func (s *threadsSteps) seesGone(who, alias string) error {
	th, err := s.thread(alias)
	if err != nil {
		return err
	}
	var last *response
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request(who, http.MethodGet, byThread(th), nil, reqOpts{Quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		var ac agentConv
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &ac) == nil && ac.Root.Kind == "gone", nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(last.Op+" as "+who, fmt.Sprintf("%d %s", last.Status, clip(string(last.Body), 300)), `200 with root {"kind": "gone"}`)
	}
	return nil
}
