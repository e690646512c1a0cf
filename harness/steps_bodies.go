package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

	"github.com/cucumber/godog"
)

// holding is what a conversation held when a scenario noted it: the whole history (every page,
// as the system wrote it), the status and the participants, each as the raw body of its read.
type holding struct {
	history, status, participants string
}

// bodyBytes turns a body written in a feature into the bytes sent: the text as it stands, except
// that \xHH is the byte HH (so a feature can write bytes that are not UTF-8). A JSON escape such
// as \ud800 is left as it is, for the system to read.
func bodyBytes(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			b, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return nil, harnessErr("bad \\x escape in body %q", s)
			}
			out = append(out, byte(b))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return out, nil
}

// hold reads what the current conversation holds as who.
func (s *scenario) hold(who string) (holding, error) {
	c, err := s.conv("")
	if err != nil {
		return holding{}, err
	}
	p := "/conversations/" + url.PathEscape(c.id)
	var h holding
	var pages bytes.Buffer
	cursor := ""
	for range 1000 {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, p+"/history"+q, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.status != http.StatusOK {
			return holding{}, fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 and a page")
		}
		var pg page
		if err := r.json(&pg); err != nil {
			return holding{}, err
		}
		for _, e := range pg.Entries {
			pages.Write(e)
			pages.WriteByte('\n')
		}
		if pg.Done || (pg.NextCursor == cursor && len(pg.Entries) == 0) {
			break
		}
		cursor = pg.NextCursor
	}
	h.history = pages.String()
	for _, read := range []struct {
		path string
		into *string
	}{{p, &h.status}, {p + "/participants", &h.participants}} {
		r, err := s.cl.do(s.ctx, who, http.MethodGet, read.path, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.status != http.StatusOK {
			return holding{}, fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200")
		}
		*read.into = string(r.body)
	}
	return h, nil
}

func (s *scenario) registerBodies(sc *godog.ScenarioContext) {
	sc.Step(`^(\w[\w' ]*?) notes what (?:her|his) conversation holds$`, func(who string) error {
		h, err := s.hold(who)
		if err != nil {
			return err
		}
		s.held = &h
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s conversation holds exactly what it held$`, func(who string) error {
		if s.held == nil {
			return harnessErr("nobody noted what the conversation held")
		}
		h, err := s.hold(who)
		if err != nil {
			return err
		}
		for _, d := range []struct{ what, got, want string }{
			{"the history", h.history, s.held.history},
			{"the status", h.status, s.held.status},
			{"the participants", h.participants, s.held.participants},
		} {
			if d.got != d.want {
				return fail("GET "+d.what+" after the refused request", clip(d.got, 600), clip(d.want, 600)+" (what it held before)")
			}
		}
		return nil
	})
	sc.Step("^(\\w[\\w' ]*?) posts the body `(.*)` to the (start|turns|close|participants|runtime start|runtime send) route(?: as \"([^\"]*)\")?$", func(who, body, route, ct string) error {
		raw, err := bodyBytes(body)
		if err != nil {
			return err
		}
		var path string
		switch route {
		case "start":
			path = "/conversations"
		case "runtime start":
			path = "/runtime/executions"
		default:
			c, err := s.conv("")
			if err != nil {
				return err
			}
			path = "/conversations/" + url.PathEscape(c.id) + "/" + route
			if route == "runtime send" {
				path = "/runtime/executions/" + url.PathEscape(c.id) + "/messages"
			}
		}
		if ct == "" {
			ct = "application/json"
		}
		r, err := s.cl.do(s.ctx, who, http.MethodPost, path, nil, reqOpts{rawBody: raw, contentType: ct, offSpec: true})
		s.last = r
		if err != nil {
			return err
		}
		if (route == "runtime start" || route == "runtime send") && !s.run.door {
			return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
		}
		return nil
	})
	sc.Step("^the answer is (\\d+) with the body `(.*)`$", func(code int, want string) error {
		if s.last == nil {
			return harnessErr("no request has been sent")
		}
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			return harnessErr("the expected body %s is not JSON: %v", want, err)
		}
		var g any
		if s.last.status != code || json.Unmarshal(s.last.body, &g) != nil || !reflect.DeepEqual(g, w) {
			return fail(s.last.op, fmt.Sprintf("%d %s", s.last.status, clip(string(s.last.body), 300)), fmt.Sprintf("%d %s", code, want))
		}
		return nil
	})
}
