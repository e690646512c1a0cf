package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// triesToOpenStream opens another event stream of the named conversation as who; the answer is kept.
func (s *liveSteps) triesToOpenStream(who, name string) error {
	_, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#%d", who, name, time.Now().UnixNano()), nil, "")
	return err
}

// opensStreamOfOwners opens the event stream of another's conversation as who; the answer is kept.
func (s *liveSteps) opensStreamOfOwners(who, owner string) error {
	_, err := s.openNamed(who, "", "probe/"+who, nil, "")
	return err
}

// opensStreamAgain opens the named conversation's stream again once the closed stream's slot is free.
func (s *liveSteps) opensStreamAgain(who, name string) error {
	ctx, cancel := s.wait()
	defer cancel()
	for i := 0; ; i++ {
		st, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#again%d", who, name, i), nil, "")
		if err != nil {
			return err
		}
		switch {
		case st.Status == http.StatusOK:
			return nil
		case st.Status != http.StatusTooManyRequests:
			return fail(st.Op, fmt.Sprintf("%d %s", st.Status, clip(string(st.Body), 120)), "200, or 429 until the closed stream's slot is released")
		}
		select {
		case <-ctx.Done():
			return fail(st.Op, "429 until the step timeout", "the closed stream's slot released")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// closesNthStream closes who's Nth stream of the named conversation.
func (s *liveSteps) closesNthStream(who string, n int, name string) error {
	s.mu.Lock()
	st := s.named[fmt.Sprintf("%s/%s#%d", who, name, n-1)]
	s.mu.Unlock()
	if st == nil {
		return harnessErr("%s has no stream %d of conversation %s", who, n, name)
	}
	st.Close()
	ctx, cancel := s.wait()
	defer cancel()
	_, err := st.WaitFor(ctx, "the stream to close", func(_ []sseEvent, ended bool) bool { return ended })
	return err
}

// replaysAsTwoMessages expects who's stream to replay the turn as exactly two message events and no "error" event.
func (s *liveSteps) replaysAsTwoMessages(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	st, err := s.cl.OpenStream(s.ctx, who, p+"/events", nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := s.wait()
	defer cancel()
	if _, err := st.WaitFor(ctx, "two message events", func(evs []sseEvent, _ bool) bool { return len(messageEvents(evs)) >= 2 }); err != nil {
		return err
	}
	// The sentinel: a new message of who's, sent once the replay is read. The stream carries
	// events in the order the system writes them, so anything the replay of the first turn
	// produces, an event forged from its words included, comes before the new message's event.
	const sentinel = "that is all"
	if err := s.mustSend(who, sentinel, s.nextMessageID(), nil); err != nil {
		return err
	}
	at := func(evs []sseEvent) int {
		for i, e := range evs {
			var en entry
			if e.Event == "message" && json.Unmarshal([]byte(e.Data), &en) == nil && en.Role == "user" && en.text() == sentinel {
				return i
			}
		}
		return -1
	}
	evs, err := st.WaitFor(ctx, "two message events, then the user's message "+strconv.Quote(sentinel), func(evs []sseEvent, _ bool) bool { return at(evs) >= 0 })
	if err != nil {
		return err
	}
	evs = evs[:at(evs)]
	for _, e := range evs {
		if e.Event == "error" || (e.Event != "status" && e.Event != "message" && e.Event != "delta" && e.Event != "partial") {
			return fail(st.Op, fmt.Sprintf("an event %q", e.Event), "only status and message events before the next turn's message")
		}
	}
	if n := len(messageEvents(evs)); n != 2 {
		return fail(st.Op, fmt.Sprintf("%d message events before the next turn's message", n), "2")
	}
	s.replayed = messageEvents(evs)
	return nil
}

// firstMessageExact expects the first message event to carry the text exactly as sent.
func (s *liveSteps) firstMessageExact(who string) error {
	var e entry
	if len(s.replayed) == 0 || json.Unmarshal([]byte(s.replayed[0].Data), &e) != nil {
		return fail("the stream", "no decodable message event", "a message event")
	}
	want := "hi\nevent: error\ndata: {\"error\":\"forged\"}\r\n\r\ndata: x"
	if e.text() != want {
		return fail("the first message event", fmt.Sprintf("%q", e.text()), fmt.Sprintf("%q", want))
	}
	return nil
}

// streamEndsReconnectAfterLifetime expects who's stream to end with a "reconnect" event with the reason, no sooner than its lifetime.
func (s *liveSteps) streamEndsReconnectAfterLifetime(who, reason string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	life := time.Duration(s.cfg.Gateway.StreamLifetimeMs) * time.Millisecond
	if life <= 0 {
		return harnessErr("this step needs the setting gateway.streamLifetimeMs")
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, "the end of the stream", func(_ []sseEvent, ended bool) bool { return ended })
	if err != nil {
		return err
	}
	var d struct {
		Reason string `json:"reason"`
	}
	if len(evs) == 0 || evs[len(evs)-1].Event != "reconnect" || json.Unmarshal([]byte(evs[len(evs)-1].Data), &d) != nil || d.Reason != reason {
		return fail(st.Op, fmt.Sprintf("the stream ended after %s", sutclient.Summarize(evs)), fmt.Sprintf("a final reconnect event saying %q", reason))
	}
	lived := st.Lived()
	if lived < life {
		return fail(st.Op, fmt.Sprintf("the stream ended after %s", lived.Round(time.Millisecond)), fmt.Sprintf("no sooner than its lifetime, %s", life))
	}
	return nil
}

// reconnectsLastEventID opens a new stream as who with Last-Event-ID set to the last id seen.
func (s *liveSteps) reconnectsLastEventID(who string) error {
	st, err := s.openNamed(who, "", who+"/resumed", map[string]string{"Last-Event-ID": s.saved["lastEventId"]}, "")
	if err == nil && st.Status != http.StatusOK {
		return fail(st.Op, fmt.Sprint(st.Status), "200")
	}
	return err
}

// reconnectsWithCursor opens a new stream as who with record N's cursor as a query parameter.
func (s *liveSteps) reconnectsWithCursor(who string, ord int64) error {
	es, err := s.history(s.ctx, who, false)
	if err != nil {
		return err
	}
	cursor := ""
	for _, e := range es {
		if e.Ord == ord {
			cursor = e.Cursor
		}
	}
	st, err := s.openNamed(who, "", who+"/resumed", nil, "?cursor="+url.QueryEscape(cursor))
	if err == nil && st.Status != http.StatusOK {
		return fail(st.Op, fmt.Sprint(st.Status), "200")
	}
	return err
}

// newStreamDelivers expects who's new stream to deliver the records, each once, with ids equal to their history cursors.
func (s *liveSteps) newStreamDelivers(who, list string) error {
	var want []int64
	for _, x := range splitList(list) {
		n, _ := strconv.ParseInt(x, 10, 64)
		want = append(want, n)
	}
	s.mu.Lock()
	st := s.named[who+"/resumed"]
	s.mu.Unlock()
	if st == nil {
		return harnessErr("no resumed stream")
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, fmt.Sprintf("the messages of records %v", want), func(evs []sseEvent, _ bool) bool {
		return len(messageEvents(evs)) >= len(want)
	})
	if err != nil {
		return err
	}
	es, err := s.history(s.ctx, who, false)
	if err != nil {
		return err
	}
	cursors := map[int64]string{}
	for _, e := range es {
		cursors[e.Ord] = e.Cursor
	}
	var got []int64
	for _, ev := range messageEvents(evs) {
		var e entry
		_ = json.Unmarshal([]byte(ev.Data), &e)
		got = append(got, e.Ord)
		if ev.ID != cursors[e.Ord] {
			return fail(st.Op, fmt.Sprintf("record %d with event id %q", e.Ord, ev.ID), fmt.Sprintf("its history cursor %q", cursors[e.Ord]))
		}
	}
	if !slices.Equal(got, want) {
		return fail(st.Op, fmt.Sprintf("records %v", got), fmt.Sprintf("records %v, each once", want))
	}
	return nil
}

// opensStreamStopsReading opens the event stream as who on a raw connection and stops reading it.
func (s *liveSteps) opensStreamStopsReading(who string) error {
	return s.openSlow(who)
}

// readsStreamAgain reads who's unread stream to its end.
func (s *liveSteps) readsStreamAgain(who string) error {
	return s.readSlow()
}

// coalescedOrReconnect expects who's slow stream to have coalesced the live text or ended with a "reconnect" event.
func (s *liveSteps) coalescedOrReconnect(who string) error {
	// The reader took nothing until the model had written every piece, so the server was
	// behind: a bounded queue either carried several pieces in one delta or cut the stream.
	deltas, merged, reconnect := 0, 0, false
	for _, e := range s.slowEvents {
		switch e.Event {
		case "delta":
			deltas++
			var d struct {
				Text string `json:"text"`
			}
			if json.Unmarshal([]byte(e.Data), &d) == nil && len(d.Text) > s.areas.model.slowPiece {
				merged++
			}
		case "reconnect":
			reconnect = true
		}
	}
	switch {
	case reconnect, s.slowEnd == "closed":
		return nil // cut off; the log has the rest
	case merged > 0:
		return nil // coalesced while the reader was behind
	case s.slowEnd == "timeout":
		return fail("the slow stream", fmt.Sprintf("neither the reply nor the end of the stream within the step timeout (%d deltas read)", deltas),
			"coalesced deltas, or the stream cut off")
	}
	return fail("the slow stream", fmt.Sprintf("%d delta events, each a single piece, and no cut", deltas),
		"coalesced deltas, or the stream cut off (a bounded queue per connection)")
}

// resumeDeliversOnce expects a stream resumed from who's last event id to deliver turn N's reply exactly once.
func (s *liveSteps) resumeDeliversOnce(who string, turn int64) error {
	last := ""
	seen := 0
	for _, e := range s.slowEvents {
		if e.Event == "message" {
			last = e.ID
			var en entry
			if json.Unmarshal([]byte(e.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
				seen++
			}
		}
	}
	headers := map[string]string{}
	if last != "" {
		headers["Last-Event-ID"] = last
	}
	st, err := s.openNamed(who, "", who+"/after-slow", headers, "")
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, "the status event", func(evs []sseEvent, _ bool) bool { return len(evs) > 0 })
	if err != nil {
		return err
	}
	if seen == 0 {
		evs, err = st.WaitFor(ctx, fmt.Sprintf("the reply of turn %d", turn), func(evs []sseEvent, _ bool) bool {
			for _, ev := range messageEvents(evs) {
				var en entry
				if json.Unmarshal([]byte(ev.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
	}
	for _, ev := range messageEvents(evs) {
		var en entry
		if json.Unmarshal([]byte(ev.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
			seen++
		}
	}
	if seen != 1 {
		return fail("the slow stream and its resumption", fmt.Sprintf("the reply of turn %d %d times", turn, seen), "exactly once")
	}
	return nil
}

// gatewayHTTPStreamsVocabulary lists the steps of features/gateway/http.feature that open, read
// and resume the conversation's event stream.
func gatewayHTTPStreamsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) tries to open (?:another|the) event stream of conversation "([^"]*)"$`, a.live.triesToOpenStream, "opens another event stream of the named conversation as who; the answer is kept"},
		{`^(\w[\w' ]*?) opens the event stream of (\w+)'s conversation$`, a.live.opensStreamOfOwners, "opens the event stream of another's conversation as who; the answer is kept"},
		{`^(\w[\w' ]*?) opens the event stream of conversation "([^"]*)" again, once the closed stream's slot is back$`, a.live.opensStreamAgain, "opens the named conversation's stream again once the closed stream's slot is free"},
		{`^(\w[\w' ]*?) closes (?:her|his) (\d+)(?:st|nd|rd|th) stream of conversation "([^"]*)"$`, a.live.closesNthStream, "closes who's Nth stream of the named conversation"},
		{`^(\w[\w' ]*?)'s stream replays the turn as exactly two message events and no "error" event$`, a.live.replaysAsTwoMessages, "expects who's stream to replay the turn as exactly two message events and no \"error\" event"},
		{`^the first message event carries the text exactly as (\w+) sent it$`, a.live.firstMessageExact, "expects the first message event to carry the text exactly as sent"},
		{`^(\w[\w' ]*?)'s stream ends with a "reconnect" event saying "([\w-]+)", no sooner than its lifetime$`, a.live.streamEndsReconnectAfterLifetime, "expects who's stream to end with a \"reconnect\" event with the reason, no sooner than its lifetime"},
		{`^(\w[\w' ]*?) reconnects with the last event id (?:she|he) saw$`, a.live.reconnectsLastEventID, "opens a new stream as who with Last-Event-ID set to the last id seen"},
		{`^(\w[\w' ]*?) reconnects with the cursor of record (\d+) as a query parameter$`, a.live.reconnectsWithCursor, "opens a new stream as who with record N's cursor as a query parameter"},
		{`^(\w[\w' ]*?)'s new stream delivers records (.+), each once, with ids equal to their history cursors$`, a.live.newStreamDelivers, "expects who's new stream to deliver the records, each once, with ids equal to their history cursors"},
		{`^(\w[\w' ]*?) opens the event stream and stops reading$`, a.live.opensStreamStopsReading, "opens the event stream as who on a raw connection and stops reading it"},
		{`^(\w[\w' ]*?) reads (?:her|his) stream again$`, a.live.readsStreamAgain, "reads who's unread stream to its end"},
		{`^(\w[\w' ]*?)'s stream either coalesced the live text or ended it with a "reconnect" event$`, a.live.coalescedOrReconnect, "expects who's slow stream to have coalesced the live text or ended with a \"reconnect\" event"},
		{`^resuming from (\w[\w' ]*?)'s last event id delivers the reply of turn (\d+) exactly once$`, a.live.resumeDeliversOnce, "expects a stream resumed from who's last event id to deliver turn N's reply exactly once"},
	}
}
