package steps

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/loomcheck/loomcheck/harness/world"
)

// personJSON is who's identity as the wire names it.
func (s *threadsSteps) personJSON(who string) (map[string]string, error) {
	p, ok := world.PeerPeople[who]
	if !ok {
		if p, ok = s.principal(who); !ok {
			return nil, harnessErr("unknown person %q", who)
		}
	}
	return map[string]string{"tenant": p.Tenant, "actor": p.Actor}, nil
}

// probe remembers how to ask the same request at an id nothing holds.
func (s *threadsSteps) probe(who, method, path string, body any) {
	s.missing = func() (*response, error) {
		return s.ask(who, method, path, body, reqOpts{})
	}
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// postText posts a text to the box as the peer with the accept token.
func (s *threadsSteps) postText(body any, raw []byte, auth string) (*response, error) {
	s.ready()
	h := map[string]string{}
	if auth != "" {
		h["Authorization"] = auth
	}
	// The kit sends malformed and unauthorized texts on purpose: the request is not checked
	// against the contract, the answer is.
	return s.request("", http.MethodPost, world.PathPeerTexts, body, reqOpts{OffSpec: true, Headers: h, RawBody: raw})
}

func (s *threadsSteps) lastAnswer() (*response, error) {
	if s.last == nil {
		return nil, harnessErr("no answer yet")
	}
	return s.last, nil
}

// exactly expects the last answer to be the status and the JSON body.
func (s *threadsSteps) exactly(status int, body any) error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(body)
	want := fmt.Sprintf("%d %s", status, canonJSON(string(b)))
	got := fmt.Sprintf("%d %s", r.Status, canonJSON(string(r.Body)))
	if got != want {
		return fail(r.Op, got, want)
	}
	return nil
}

// isPerson reports whether raw names who: their identity object, or their actor.
func (s *threadsSteps) isPerson(raw json.RawMessage, who string) bool {
	p, err := s.personJSON(who)
	if err != nil {
		return false
	}
	var actor string
	if json.Unmarshal(raw, &actor) == nil {
		return actor == p["actor"]
	}
	var got map[string]any
	if json.Unmarshal(raw, &got) != nil {
		return false
	}
	return got["actor"] == p["actor"] && (got["tenant"] == nil || got["tenant"] == p["tenant"])
}

// members turns "bob, carol" into identities.
func (s *threadsSteps) members(list string) ([]map[string]string, error) {
	out := []map[string]string{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		p, err := s.personJSON(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// createTask creates a task (a subtask when parent is set) and remembers its id.
func (s *threadsSteps) createTask(who, alias, title, list, parent string) error {
	ms, err := s.members(list)
	if err != nil {
		return err
	}
	body := map[string]any{"title": unescape(title), "members": ms}
	if parent != "" {
		body["parent"] = parent
	}
	r, err := s.request(who, http.MethodPost, "/tasks", body, reqOpts{})
	if err != nil {
		return err
	}
	var got struct {
		ID string `json:"id"`
	}
	if r.Status != http.StatusCreated {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "201 with the task's id")
	}
	if err := r.JSON(&got); err != nil {
		return err
	}
	if got.ID == "" {
		return fail(r.Op, string(r.Body), "the task's id")
	}
	s.bound["task "+alias] = got.ID
	return nil
}

func (s *threadsSteps) taskID(alias string) (string, error) {
	s.ready()
	id, ok := s.bound["task "+alias]
	if !ok {
		return "", harnessErr("unknown task %q", alias)
	}
	return id, nil
}

// sendCall is one scripted call of peer.send.
func (s *threadsSteps) sendCall(args string) world.Reply {
	return world.Reply{ToolCalls: []world.ToolCall{{ID: s.areas.model.callID(), Name: "peer.send", Arguments: args}}}
}

func (s *threadsSteps) script(match string, rs ...world.Reply) error {
	if err := s.world.Model().EnqueueFor(match, rs...); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// lastUser is the content of the last user message.
func lastUser(msgs []world.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// requestsFor are the requests to the model whose last user message is the text.
func (s *threadsSteps) requestsFor(txt string) []world.ModelRequest {
	var out []world.ModelRequest
	for _, r := range s.world.Model().Requests() {
		if lastUser(r.Messages) == txt {
			out = append(out, r)
		}
	}
	return out
}

func (s *threadsSteps) describeDeliveries() string {
	var parts []string
	for _, d := range s.world.Peer().Deliveries() {
		parts = append(parts, string(d.Body))
	}
	return strings.Join(parts, " | ")
}

// thread is the id of a thread alias.
func (s *threadsSteps) thread(alias string) (string, error) {
	s.ready()
	id, ok := s.bound["thread "+alias]
	if !ok {
		return "", harnessErr("thread %q is not known yet", alias)
	}
	return id, nil
}

func byThread(id string) string {
	return "/agent-conversations?connection=" + world.PeerConnection + "&thread=" + url.QueryEscape(id)
}

// acID is the id of the thread's agent conversation, read as its role when not yet known.
func (s *threadsSteps) acID(alias string) (string, error) {
	if id, ok := s.bound["ac "+alias]; ok {
		return id, nil
	}
	th, err := s.thread(alias)
	if err != nil {
		return "", err
	}
	p := s.pairs[alias]
	var last *response
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request("role:"+p.role, http.MethodGet, byThread(th), nil, reqOpts{Quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		return r.Status == http.StatusOK, nil
	})
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fail(last.Op, fmt.Sprintf("%d %s", last.Status, clip(string(last.Body), 200)), "200: the role reads its own agent conversation")
	}
	var got struct {
		ID string `json:"id"`
	}
	if err := last.JSON(&got); err != nil || got.ID == "" {
		return "", fail(last.Op, string(last.Body), "the agent conversation's id")
	}
	s.bound["ac "+alias] = got.ID
	return got.ID, nil
}

// agentConversation reads the thread's agent conversation as its role.
func (s *threadsSteps) agentConversation(alias string) (*agentConv, error) {
	if _, err := s.acID(alias); err != nil {
		return nil, err
	}
	th, _ := s.thread(alias)
	r, err := s.request("role:"+s.pairs[alias].role, http.MethodGet, byThread(th), nil, reqOpts{Quiet: true})
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200")
	}
	var ac agentConv
	if err := r.JSON(&ac); err != nil {
		return nil, err
	}
	return &ac, nil
}

// substitute writes the template with every known placeholder replaced by its value.
func (s *threadsSteps) substitute(t string) string {
	return placeholderThreadsRE.ReplaceAllStringFunc(t, func(m string) string {
		sub := placeholderThreadsRE.FindStringSubmatch(m)
		if v, ok := s.bound[sub[1]+" "+sub[2]]; ok {
			return v
		}
		return m
	})
}

// match reports whether got is the template want with each placeholder standing for one value:
// a known one for its value, an unknown one for any id of its kind, the same everywhere it
// appears; on a match the unknown ones are remembered.
func (s *threadsSteps) match(want, got string) bool {
	s.ready()
	var re strings.Builder
	re.WriteString(`(?s)^`)
	var keys []string
	at := 0
	for _, loc := range placeholderThreadsRE.FindAllStringSubmatchIndex(want, -1) {
		re.WriteString(regexp.QuoteMeta(want[at:loc[0]]))
		at = loc[1]
		kind := want[loc[2]:loc[3]]
		key := kind
		if loc[4] >= 0 {
			key += " " + want[loc[4]:loc[5]]
		}
		if v, ok := s.bound[key]; ok && kind != "any" {
			re.WriteString(regexp.QuoteMeta(v))
			continue
		}
		switch kind {
		case "any":
			re.WriteString(`(?:[^"\n]*)`)
			continue
		case "thread":
			re.WriteString(`([A-Za-z0-9_-]{16,64})`)
		case "message":
			re.WriteString(`([A-Za-z0-9_-]{1,64})`)
		default:
			re.WriteString(`([^\s"]+?)`)
		}
		keys = append(keys, key)
	}
	re.WriteString(regexp.QuoteMeta(want[at:]))
	re.WriteString(`$`)
	m := regexp.MustCompile(re.String()).FindStringSubmatch(got)
	if m == nil {
		return false
	}
	found := map[string]string{}
	for i, k := range keys {
		if v, ok := found[k]; ok && v != m[i+1] {
			return false
		}
		found[k] = m[i+1]
	}
	for k, v := range found {
		s.bound[k] = v
	}
	return true
}
