package steps

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
)

// openRefusedAsMissing expects who's open of the current conversation to answer exactly as an
// open of an id nothing holds.
func (s *streamSteps) openRefusedAsMissing(who string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	missing, _, err := s.openSession(s.ctx, who, "no-such-session-"+s.run.ID, 0, "")
	if err != nil {
		return err
	}
	got, _, err := s.openSession(s.ctx, who, c.id, 0, "")
	s.last = got
	if err != nil {
		return err
	}
	if missing.Status != http.StatusNotFound {
		return fail(missing.Op, fmt.Sprintf("%d %s", missing.Status, clip(string(missing.Body), 200)), "404 for a session nothing holds")
	}
	if got.Status != missing.Status || !bytes.Equal(got.Body, missing.Body) {
		return fail(got.Op, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
			fmt.Sprintf("exactly the missing session's answer: %d %s", missing.Status, clip(string(missing.Body), 200)))
	}
	return nil
}

// presentsRefusedAsMissing presents the last ticket as who and expects the upgrade refused
// exactly as an open of an id nothing holds is (the uniform 404): who may read is asked again
// when a ticket is presented, not only when it was made.
func (s *streamSteps) presentsRefusedAsMissing(who, transport string) error {
	tk, err := s.lastTicket()
	if err != nil {
		return err
	}
	missing, _, err := s.openSession(s.ctx, who, "no-such-session-"+s.run.ID, 0, "")
	if err != nil {
		return err
	}
	if missing.Status != http.StatusNotFound {
		return fail(missing.Op, fmt.Sprintf("%d %s", missing.Status, clip(string(missing.Body), 200)), "404 for a session nothing holds")
	}
	op := "GET /sessions/{id}/stream (" + transport + ") with the ticket"
	want := fmt.Sprintf("exactly the missing session's answer: %d %s", missing.Status, clip(string(missing.Body), 200))
	c, err := s.present(who, tk, transport, "", "")
	if err == nil {
		c.Close()
		return fail(op, "the stream served", want)
	}
	var r *refusedErr
	if !errors.As(err, &r) {
		return err
	}
	if r.Status != missing.Status || !bytes.Equal(bytes.TrimSpace(r.Body), bytes.TrimSpace(missing.Body)) {
		return fail(op, r.Error(), want)
	}
	return nil
}

// streamHandleVocabulary lists the steps of features/stream/handle.feature.
func streamHandleVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) opening the session stream gets the same 404 as for a missing session$`, a.stream.openRefusedAsMissing, "opens the current conversation's stream as who and expects 404, byte for byte the answer an id nothing holds gets"},
		{`^(\w[\w' ]*?) presents the ticket over (WebSocket|SSE) and gets the same 404 as for a missing session$`, a.stream.presentsRefusedAsMissing, "presents the last ticket as who and expects 404, the answer an open of an id nothing holds gets"},
	}
}
