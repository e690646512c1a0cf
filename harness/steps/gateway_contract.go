package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// readsPageWithLimit reads one page of the history with the limit as who.
func (s *contractSteps) readsPageWithLimit(who string, n int) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, fmt.Sprintf("%s/history?limit=%d", p, n), nil, reqOpts{OffSpec: n < 1 || n > 500})
	s.last = r
	return err
}

// pageHoldsRecords expects the last page to hold exactly N records.
func (s *contractSteps) pageHoldsRecords(n int) error {
	if s.last == nil || s.last.Status != http.StatusOK {
		return fail(opOf(s.last), fmt.Sprintf("%d %s", statusOf(s.last), clip(string(s.last.Body), 160)), "200 and a page")
	}
	var pg page
	if err := s.last.JSON(&pg); err != nil {
		return err
	}
	if len(pg.Entries) != n {
		return fail(s.last.Op, fmt.Sprintf("a page of %d records", len(pg.Entries)), fmt.Sprintf("%d", n))
	}
	return nil
}

// walksEveryRoute calls every route of the conversation as who, errors included, each checked against the contract.
func (s *contractSteps) walksEveryRoute(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	// Each call names the answer it must get: the status and, for an error, its code.
	type call struct {
		who, method, path string
		body              any
		opts              reqOpts
		status            int
		code              string
	}
	calls := []call{
		{"", http.MethodGet, "/.well-known/loom", nil, reqOpts{}, http.StatusOK, ""},
		{who, http.MethodGet, p, nil, reqOpts{}, http.StatusOK, ""},
		{who, http.MethodGet, p + "/history?direction=backward&limit=1", nil, reqOpts{}, http.StatusOK, ""},
		{who, http.MethodGet, p + "/history?cursor=not-a-cursor", nil, reqOpts{OffSpec: true}, http.StatusBadRequest, "invalid cursor"},
		{who, http.MethodGet, p + "/participants", nil, reqOpts{}, http.StatusOK, ""},
		{who, http.MethodPost, p + "/turns", map[string]any{"text": "walking", "messageId": "walk-1"}, reqOpts{}, http.StatusAccepted, ""},
		{who, http.MethodPost, p + "/turns", nil, reqOpts{RawBody: []byte(`{"text": 5}`), OffSpec: true}, http.StatusBadRequest, "bad request"},
		{who, http.MethodPost, p + "/turns", nil, reqOpts{RawBody: []byte("walk"), ContentType: "text/plain", OffSpec: true}, http.StatusUnsupportedMediaType, "unsupported media type"},
		{"", http.MethodGet, p, nil, reqOpts{}, http.StatusUnauthorized, "unauthenticated"},
		{"mallory", http.MethodGet, p + "/history", nil, reqOpts{}, http.StatusNotFound, "not found"},
		{who, http.MethodPost, "/conversations", map[string]any{"id": "bad~id"}, reqOpts{OffSpec: true}, http.StatusBadRequest, "invalid id"},
		{who, http.MethodPost, p + "/close", map[string]any{}, reqOpts{}, http.StatusAccepted, ""},
	}
	if s.run.Door {
		calls = append(calls, call{who, http.MethodGet, "/runtime/executions/" + url.PathEscape(s.current.id) + "/log?limit=5", nil, reqOpts{}, http.StatusOK, ""})
	}
	for _, c := range calls {
		r, err := s.cl.Do(s.ctx, c.who, c.method, c.path, c.body, c.opts)
		if err != nil {
			return err
		}
		s.last = r
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != c.status || e.Error != c.code {
			want := fmt.Sprint(c.status)
			if c.code != "" {
				want += fmt.Sprintf(" %q", c.code)
			}
			return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 160)), want)
		}
	}
	st, err := s.cl.OpenStream(s.ctx, who, p+"/events", nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := s.wait()
	defer cancel()
	_, err = st.WaitFor(ctx, "the closed event", func(evs []sseEvent, ended bool) bool {
		for _, e := range evs {
			if e.Event == "closed" {
				return true
			}
		}
		return false
	})
	return err
}

// followedContract expects every exchange of the scenario so far to follow spec/openapi.yaml.
func (s *contractSteps) followedContract() error {
	seen := s.cl.Observed()
	n, v := seen.Validated, seen.Violations
	if v > 0 {
		return fail("the exchanges of this scenario", fmt.Sprintf("%d violations", v), "none")
	}
	if n < 10 {
		return harnessErr("only %d exchanges were validated", n)
	}
	return nil
}

// eachStreamEndsClosed expects each of who's streams of the conversation to end right after a "closed" event.
func (s *liveSteps) eachStreamEndsClosed(who, name string) error {
	s.mu.Lock()
	var sts []*stream
	for _, k := range sortedKeys(s.named) {
		if strings.HasPrefix(k, who+"/"+name+"#") {
			sts = append(sts, s.named[k])
		}
	}
	s.mu.Unlock()
	if len(sts) == 0 {
		return harnessErr("%s has no streams of conversation %s", who, name)
	}
	ctx, cancel := s.wait()
	defer cancel()
	for _, st := range sts {
		evs, err := st.WaitFor(ctx, "the end of the stream after the closed event", func(_ []sseEvent, ended bool) bool { return ended })
		if err != nil {
			return err
		}
		if len(evs) == 0 || evs[len(evs)-1].Event != "closed" {
			return fail(st.Op, "the stream ended after "+sutclient.Summarize(evs), `a final "closed" event`)
		}
	}
	return nil
}

// gatewayContractVocabulary lists the steps of features/gateway/contract.feature.
func gatewayContractVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) reads a page of the history with limit (-?\d+)$`, a.contract.readsPageWithLimit, "reads one page of the history with the limit as who"},
		{`^the page holds (\d+) records?$`, a.contract.pageHoldsRecords, "expects the last page to hold exactly N records"},
		{`^(\w[\w' ]*?) walks every route of the conversation, errors included$`, a.contract.walksEveryRoute, "calls every route of the conversation as who, errors included, each checked against the contract"},
		{`^every exchange so far followed the contract$`, a.contract.followedContract, "expects every exchange of the scenario so far to follow spec/openapi.yaml"},
		{`^each of (\w[\w' ]*?)'s streams of conversation "([^"]*)" ends right after a "closed" event$`, a.live.eachStreamEndsClosed, "expects each of who's streams of the conversation to end right after a \"closed\" event"},
	}
}
