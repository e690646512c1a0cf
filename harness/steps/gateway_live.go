package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/cucumber/godog"
)

// opensStream opens the event stream of the current conversation as who, expecting it open.
func (s *liveSteps) opensStream(who string) error {
	_, err := s.streamOf(who, "")
	return err
}

// opensStreamOf opens the event stream of the named conversation as who, expecting it open.
func (s *liveSteps) opensStreamOf(who, name string) error {
	st, err := s.openNamed(who, name, who+"/"+name, nil, "")
	if err != nil {
		return err
	}
	if st.Status != http.StatusOK {
		return fail(st.Op, fmt.Sprintf("%d %s", st.Status, clip(string(st.Body), 120)), "200 and an event stream")
	}
	return nil
}

// triesToOpenStreamHere opens another event stream of the current conversation as who; the answer is kept.
func (s *liveSteps) triesToOpenStreamHere(who string) error { return s.triesToOpenStream(who, "") }

// opensStreamsHere opens N event streams of the current conversation as who, each expected open.
func (s *liveSteps) opensStreamsHere(who string, n int) error { return s.opensStreams(who, n, "") }

// opensStreams opens N event streams of the named conversation as who, each expected open.
func (s *liveSteps) opensStreams(who string, n int, name string) error {
	for i := range n {
		st, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#%d", who, name, i), nil, "")
		if err != nil {
			return err
		}
		if st.Status != http.StatusOK {
			return fail(st.Op, fmt.Sprintf("stream %d of %d: %d %s", i+1, n, st.Status, clip(string(st.Body), 120)), "200 and an event stream: within the limit")
		}
	}
	return nil
}

// streamEnds waits until who's stream ends.
func (s *liveSteps) streamEnds(who string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	_, err = st.WaitFor(ctx, "the stream to end", func(_ []sseEvent, ended bool) bool { return ended })
	return err
}

// streamDeliveredMessages waits until who's stream has delivered N message events.
func (s *liveSteps) streamDeliveredMessages(who string, n int) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	_, err = st.WaitFor(ctx, fmt.Sprintf("%d message events", n), func(evs []sseEvent, _ bool) bool { return len(messageEvents(evs)) >= n })
	return err
}

// closesStream closes who's stream.
func (s *liveSteps) closesStream(who string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	evs, _ := st.Snapshot()
	for _, e := range messageEvents(evs) {
		s.saved["lastEventId"] = e.ID
	}
	st.Close()
	s.mu.Lock()
	delete(s.named, who+"/")
	s.mu.Unlock()
	return nil
}

// sendsToConversation sends the text to the named conversation as who and expects it accepted.
func (s *liveSteps) sendsToConversation(who, text, name string) error {
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	keep := s.current
	s.current = c
	defer func() { s.current = keep }()
	return s.mustSend(who, unescape(text), s.nextMessageID(), nil)
}

// streamOfConversationShows waits until the named conversation's stream shows the live text.
func (s *liveSteps) streamOfConversationShows(name, text string) error {
	st, err := s.streamFor(name)
	if err != nil {
		return err
	}
	return s.waitLive(st, unescape(text))
}

// streamShowsPartial waits until who's stream shows the partial text for turn N.
func (s *liveSteps) streamShowsPartial(who, text string, turn int64) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	_, err = st.WaitFor(ctx, fmt.Sprintf("a partial event for turn %d, then live text up to %q", turn, text), func(evs []sseEvent, _ bool) bool {
		seen := false
		for _, e := range evs {
			var d struct {
				Turn int64 `json:"turn"`
			}
			if e.Event == "partial" && json.Unmarshal([]byte(e.Data), &d) == nil && d.Turn == turn {
				seen = true
			}
		}
		return seen && liveText(evs) == unescape(text)
	})
	return err
}

// streamDeliversReply waits until who's stream delivers turn N's reply and expects its text.
func (s *liveSteps) streamDeliversReply(who string, turn int64, text string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	_, err = st.WaitFor(ctx, fmt.Sprintf("the reply of turn %d", turn), func(evs []sseEvent, _ bool) bool {
		for _, ev := range messageEvents(evs) {
			var e entry
			if json.Unmarshal([]byte(ev.Data), &e) == nil && e.Role == "assistant" && e.Turn == turn && e.text() == unescape(text) {
				return true
			}
		}
		return false
	})
	return err
}

// streamShowsReset expects who's stream to show a reset of turn N before its partial.
func (s *liveSteps) streamShowsReset(who string, turn int64) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, "a reset event", func(evs []sseEvent, _ bool) bool {
		for _, e := range evs {
			if e.Event == "reset" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Event == "partial" || e.Event == "delta" {
			return fail(st.Op, "a "+e.Event+" before the reset", "the reset first")
		}
		if e.Event == "reset" {
			var d struct {
				Turn int64 `json:"turn"`
			}
			_ = json.Unmarshal([]byte(e.Data), &d)
			if d.Turn != turn {
				return fail(st.Op, fmt.Sprintf("a reset of turn %d", d.Turn), fmt.Sprintf("turn %d", turn))
			}
			return nil
		}
	}
	return nil
}

// streamShows waits until who's stream shows the live text.
func (s *liveSteps) streamShows(who, text string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	want := unescape(text)
	_, err = st.WaitFor(ctx, fmt.Sprintf("live text %q (delta or partial events)", want), func(evs []sseEvent, _ bool) bool {
		return strings.Contains(liveText(evs), want)
	})
	return err
}

// streamEventsBefore expects who's stream to have got exactly the table's events before turn N's message.
func (s *liveSteps) streamEventsBefore(who string, turn int64, t *godog.Table) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	return s.exactEventsBefore(st, t, turn)
}

// newStreamEventsBefore expects who's resumed stream to have got exactly the table's events before turn N's message.
func (s *liveSteps) newStreamEventsBefore(who string, turn int64, t *godog.Table) error {
	s.mu.Lock()
	st := s.named[who+"/resumed"]
	s.mu.Unlock()
	if st == nil {
		return harnessErr("no resumed stream of %s", who)
	}
	return s.exactEventsBefore(st, t, turn)
}

// conversationEventsBefore expects the named conversation's stream to have got exactly the table's events before turn N's message.
func (s *liveSteps) conversationEventsBefore(name string, turn int64, t *godog.Table) error {
	st, err := s.streamFor(name)
	if err != nil {
		return err
	}
	return s.exactEventsBefore(st, t, turn)
}

type jsonRaw string

// eventRow is an event of a stream as a table row: the event name, then turn, role, status and
// text where the event has them.
type eventRow struct{ event, turn, role, status, text string }

// gatewayLiveVocabulary lists the steps of features/gateway/live.feature.
func gatewayLiveVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) opens the event stream$`, a.live.opensStream, "opens the event stream of the current conversation as who, expecting it open"},
		{`^(\w[\w' ]*?) opens the event stream of conversation "([^"]*)"$`, a.live.opensStreamOf, "opens the event stream of the named conversation as who, expecting it open"},
		{`^(\w[\w' ]*?) opens (\d+) event streams of the conversation$`, a.live.opensStreamsHere, "opens N event streams of the current conversation as who, each expected open"},
		{`^(\w[\w' ]*?) tries to open another event stream of the conversation$`, a.live.triesToOpenStreamHere, "opens another event stream of the current conversation as who; the answer is kept"},
		{`^(\w[\w' ]*?) opens (\d+) event streams of conversation "([^"]*)"$`, a.live.opensStreams, "opens N event streams of the named conversation as who, each expected open"},
		{`^(\w[\w' ]*?)'s stream ends$`, a.live.streamEnds, "waits until who's stream ends"},
		{`^(\w[\w' ]*?)'s stream has delivered (\d+) messages$`, a.live.streamDeliveredMessages, "waits until who's stream has delivered N message events"},
		{`^(\w[\w' ]*?) closes (?:her|his) stream$`, a.live.closesStream, "closes who's stream"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" to conversation "([^"]*)"$`, a.live.sendsToConversation, "sends the text to the named conversation as who and expects it accepted"},
		{`^the stream of conversation "([^"]*)" shows "((?:[^"\\]|\\.)*)"$`, a.live.streamOfConversationShows, "waits until the named conversation's stream shows the live text"},
		{`^(\w[\w' ]*?)'s stream shows a partial "((?:[^"\\]|\\.)*)" for turn (\d+)$`, a.live.streamShowsPartial, "waits until who's stream shows the partial text for turn N"},
		{`^(\w[\w' ]*?)'s stream delivers the reply of turn (\d+) with the text "((?:[^"\\]|\\.)*)"$`, a.live.streamDeliversReply, "waits until who's stream delivers turn N's reply and expects its text"},
		{`^(\w[\w' ]*?)'s stream shows a reset of turn (\d+) before its partial$`, a.live.streamShowsReset, "expects who's stream to show a reset of turn N before its partial"},
		{`^(\w[\w' ]*?)'s stream shows "((?:[^"\\]|\\.)*)"$`, a.live.streamShows, "waits until who's stream shows the live text"},
		{`^(\w[\w' ]*?)'s stream got exactly these events before the message of turn (\d+):$`, a.live.streamEventsBefore, "expects who's stream to have got exactly the table's events before turn N's message"},
		{`^(\w[\w' ]*?)'s new stream got exactly these events before the message of turn (\d+):$`, a.live.newStreamEventsBefore, "expects who's resumed stream to have got exactly the table's events before turn N's message"},
		{`^the stream of conversation "([^"]*)" got exactly these events before the message of turn (\d+):$`, a.live.conversationEventsBefore, "expects the named conversation's stream to have got exactly the table's events before turn N's message"},
	}
}
