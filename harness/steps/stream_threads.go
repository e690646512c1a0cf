package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// branches asks to branch the current session at message id as who, with the key unless
// without is said.
func (s *steerSteps) branches(who, id, key, without string) error {
	o := reqOpts{OffSpec: without != ""} // the contract requires the key: none is sent on purpose
	if without == "" {
		o.Headers = map[string]string{"Idempotency-Key": key}
	}
	return s.post(who, "/messages/"+url.PathEscape(id)+"/branch", nil, o)
}

// branchAnswered expects the last answer to be a branch's 201 {session, from, message}: from the
// current session, at the message, into a session of its own; that session is then "the branch"
// and the current one "the original".
func (s *steerSteps) branchAnswered(who, id string) error {
	if s.last == nil {
		return harnessErr("no answer yet")
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	var got map[string]any
	_ = json.Unmarshal(s.last.Body, &got)
	sess, _ := got["session"].(string)
	want := fmt.Sprintf(`201 {"from": %q, "message": %q, "session": <a conversation id other than %q>}`, c.id, id, c.id)
	if s.last.Status != http.StatusCreated || len(got) != 3 || got["from"] != c.id || got["message"] != id || sess == "" || sess == c.id {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 300)), want)
	}
	if _, ok := s.convs["the original"]; !ok {
		s.convs["the original"] = c
	}
	s.convs["the branch"] = &conv{name: "the branch", id: sess, owner: who}
	s.saved["first branch answer"] = strconv.Itoa(s.last.Status) + " " + string(s.last.Body)
	return nil
}

// sameAsFirstBranch expects the last answer to be the first branch answer, status and body.
func (s *steerSteps) sameAsFirstBranch() error {
	first, ok := s.saved["first branch answer"]
	if !ok {
		return harnessErr("no branch has answered yet")
	}
	code, body, _ := strings.Cut(first, " ")
	var want, got any
	_ = json.Unmarshal([]byte(body), &want)
	gerr := json.Unmarshal(s.last.Body, &got)
	if strconv.Itoa(s.last.Status) != code || gerr != nil || !reflect.DeepEqual(got, want) {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 300)), first)
	}
	return nil
}

// goesOnIn makes the named session the current one.
func (s *steerSteps) goesOnIn(name string) error {
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	s.current = c
	return nil
}

// streamThreadsVocabulary lists the steps of features/stream/threads.feature.
func streamThreadsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) branches the session at "([^"]*)"(?: with the key "([^"]*)"| (without a key))$`, a.steer.branches, "asks to branch the current session at the message as who, with the Idempotency-Key (or none); the answer is kept"},
		{`^the branch answers 201 with a new session of (\w[\w' ]*?)'s, from the session, at "([^"]*)"$`, a.steer.branchAnswered, "expects the last answer to be 201 {session, from, message} with from the current session, message the one named and session a conversation id of its own; the session is known as \"the branch\" from then on, and the current one as \"the original\""},
		{`^the session answers exactly what the first branch answered$`, a.steer.sameAsFirstBranch, "expects the last answer to be the first branch answer's status and body, member for member"},
		{`^the scenario goes on in (the branch|the original)$`, a.steer.goesOnIn, "makes the named session (a branch's, or the one it came from) the current one of the steps that follow"},
	}
}
