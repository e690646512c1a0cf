package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"
)

// ticketAged waits until the last ticket is at least ms old (counted from its answer's arrival,
// after the ticket was made).
func (s *streamSteps) ticketAged(ms int) error {
	if s.opened == nil {
		return harnessErr("no ticket was opened before this step")
	}
	select {
	case <-time.After(time.Until(s.openedAt.Add(time.Duration(ms) * time.Millisecond))):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// openAnswerGoodFor expects the last open's ticket to be good for exactly secs seconds.
func (s *streamSteps) openAnswerGoodFor(secs int64) error {
	if s.opened == nil {
		return harnessErr("no open was answered in this scenario")
	}
	if s.opened.ExpiresIn != secs {
		return fail("POST "+streamOpenPath(s.opened.Session), fmt.Sprintf("expiresIn %d", s.opened.ExpiresIn), fmt.Sprintf("expiresIn %d", secs))
	}
	return nil
}

// presentsRefused presents the last (or a made-up) ticket and expects exactly the refusal.
func (s *streamSteps) presentsRefused(who, which, transport, device, name, reason string) error {
	tk := "never-made-" + s.run.ID
	if which == "the ticket" {
		var err error
		if tk, err = s.lastTicket(); err != nil {
			return err
		}
	}
	op := "GET /sessions/{id}/stream (" + transport + ") with " + which
	want := fmt.Sprintf(`401 {"error":"ticket refused","reason":%q}`, reason)
	c, err := s.present(who, tk, transport, device, name)
	if err == nil {
		c.Close()
		return fail(op, "the stream served", want)
	}
	var r *refusedErr
	if !errors.As(err, &r) {
		return err
	}
	var body map[string]any
	_ = json.Unmarshal(r.Body, &body)
	if r.Status != http.StatusUnauthorized || !reflect.DeepEqual(body, map[string]any{"error": "ticket refused", "reason": reason}) {
		return fail(op, r.Error(), want)
	}
	return nil
}

// streamTicketsVocabulary lists the steps of features/stream/tickets.feature.
func streamTicketsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the ticket is (\d+) ms old$`, a.stream.ticketAged, "waits until the last ticket is at least N ms old, counted from the arrival of its open's answer"},
		{`^the open answer says the ticket is good for (\d+) seconds$`, a.stream.openAnswerGoodFor, "expects the last open's expiresIn to be exactly N"},
		{`^(\w[\w' ]*?) presents (the ticket|a ticket never made) over (WebSocket|SSE)(?: on device "([^"]*)")?(?: for conversation "([^"]*)")? and is refused as "(\w+)"$`, a.stream.presentsRefused, "presents the last ticket (or a made-up one) as who and expects exactly 401 {\"error\":\"ticket refused\",\"reason\":R}"},
	}
}
