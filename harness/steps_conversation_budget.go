package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// steps is the budget vocabulary: each pattern, the method that runs it, what it means.
func (s *budgetSteps) steps() []stepDef {
	return []stepDef{
		{`^the summarizer is not configured$`, s.summarizerNotConfigured, "configures the system without a summarizer"},
		{`^the summarizer (always )?answers "((?:[^"\\]|\\.)*)"$`, s.summarizerAnswers, "scripts the summarizer's next answer (or every answer) with the text"},
		{`^the summarizer (always )?answers a summary of (\d+) characters$`, s.summarizerAnswersSummaryCharacters, "scripts the summarizer's next answer (or every answer) with a summary of N characters"},
		{`^the summarizer then (always )?fails with status (\d+)$`, s.summarizerFails, "scripts the summarizer's next call (or every call) to fail with the status"},
		{`^summarizer request (\d+) holds the previous summary "((?:[^"\\]|\\.)*)" and the messages:$`, s.summarizerRequestHolds, "expects summarizer request N to carry the previous summary and exactly the messages of the table"},
		{`^the summarizer holds its next answer$`, s.summarizerWaits, "scripts the summarizer's next answer to wait and never come (a later call gets the next answer)"},
		{`^the summarizer has been asked (\d+) times?$`, s.summarizerAsked, "waits until the summarizer has been asked at least N times"},
		{`^the summarizer has been asked (\d+) times? in all$`, s.summarizerAskedInAll, "expects the summarizer to have been asked exactly N times over the whole scenario"},
		{`^the summarizer was handed the words of turn (\d+)$`, s.summarizerHandedTurn, "expects the summarizer to have been handed the words of turn N"},
		{`^request (\d+) to the model carries the summary "((?:[^"\\]|\\.)*)" fenced in a user message$`, s.requestCarriesSummary, "expects request N to the model to carry the summary text fenced in a user message"},
		{`^request (\d+) to the model carries that summary, fenced$`, s.requestCarriesThatSummary, "expects request N to the model to carry the last scripted summary, fenced"},
		{`^request (\d+) to the model carries the first (\d+) characters of that summary, fenced$`, s.requestCarriesSummaryPrefix, "expects request N to the model to carry the first N characters of the last scripted summary, fenced"},
		{`^request (\d+) to the model carries no summary$`, s.requestCarriesNoSummary, "expects request N to the model to carry no summary"},
		{`^no system message of any request to the model holds "((?:[^"\\]|\\.)*)"$`, s.noSystemMessageHolds, "expects no system message of any request to the model to hold the text"},
		{`^the window of request (\d+) to the model holds turns (.+)$`, s.windowHoldsTurns, "expects the window of request N to the model to hold exactly the listed turns"},
		{`^request (\d+) to the model holds the newest of turns (.+), at least one, each whole, then "((?:[^"\\]|\\.)*)"$`, s.requestHoldsNewestOf, "expects request N to the model to hold, before the text, the newest one or more of the listed turns, each turn's question and reply exactly as the history has them, and nothing else"},
		{`^(\w[\w' ]*?) sends (\d+) characters of "([^"]+)"$`, s.sendsCharactersOf, "sends the text repeated N times, as one message, as who"},
		{`^the system is killed and restarted with the setting "([^"]+)" at (.+)$`, s.killedRestartedWithSetting, "kills the system and restarts it with one setting changed"},
		{`^(\w[\w' ]*?) has had (\d+) turns of (\d+) characters answered$`, s.hasHadTurnsOfSize, "sends N messages of N characters as who and waits until each is answered"},
		{`^the summarizer was never handed the words "((?:[^"\\]|\\.)*)"$`, s.summarizerNeverHanded, "expects the summarizer never to have been handed the words"},
	}
}

// summarizerNotConfigured configures the system without a summarizer.
func (s *budgetSteps) summarizerNotConfigured() error {
	return s.configure(func(c *spec.SUTConfig) { c.Summarizer.URL = "" })
}

// summarizerAnswers scripts the summarizer's next answer (or every answer) with the text.
func (s *budgetSteps) summarizerAnswers(always, text string) error {
	n := 1
	if always != "" {
		n = 50
	}
	s.summary = unescape(text)
	return s.enqueue(n, world.Summary{Text: s.summary})
}

// summarizerWaits scripts the summarizer's next answer to wait (until the world closes, or the
// call goes away); a call after it gets the next scripted answer, or the default one.
func (s *budgetSteps) summarizerWaits() error {
	return s.enqueue(1, world.Summary{Hold: s.world.NewHold()})
}

// summarizerAnswersSummaryCharacters scripts the summarizer's next answer (or every answer) with a summary of N characters.
func (s *budgetSteps) summarizerAnswersSummaryCharacters(always string, size int) error {
	n := 1
	if always != "" {
		n = 50
	}
	s.summary = s.summaryText(size)
	return s.enqueue(n, world.Summary{Text: s.summary})
}

// summarizerFails scripts the summarizer's next call (or every call) to fail with the status.
func (s *budgetSteps) summarizerFails(always string, status int) error {
	n := 1
	if always != "" {
		n = 50
	}
	return s.enqueue(n, world.Summary{Fail: &world.Failure{Status: status, Message: "summarizer down"}})
}

// summarizerRequestHolds expects summarizer request N to carry the previous summary and exactly the messages of the table.
func (s *budgetSteps) summarizerRequestHolds(i int, prev string, t *godog.Table) error {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Summarizer().WaitRequests(ctx, i); err != nil {
		return fail("the summarizer", fmt.Sprintf("%d calls", len(s.world.Summarizer().Requests())), fmt.Sprintf("a call number %d", i))
	}
	req := s.world.Summarizer().Requests()[i-1]
	var want, got []string
	for _, row := range t.Rows[1:] {
		content, err := s.expandMessage(unescape(row.Cells[1].Value))
		if err != nil {
			return err
		}
		want = append(want, row.Cells[0].Value+": "+content)
	}
	for _, m := range req.Messages {
		got = append(got, m.Role+": "+m.Content)
	}
	want = append(want, "previous: "+unescape(prev))
	got = append(got, "previous: "+req.Previous)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail(fmt.Sprintf("summarizer request %d", i), "\n"+strings.Join(got, "\n"), "\n"+strings.Join(want, "\n"))
	}
	return nil
}

// summarizerAsked waits until the summarizer has been asked at least N times.
func (s *budgetSteps) summarizerAsked(n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Summarizer().WaitRequests(ctx, n); err != nil {
		return fail("the summarizer", fmt.Sprintf("%d calls", len(s.world.Summarizer().Requests())), fmt.Sprintf("at least %d", n))
	}
	return nil
}

// summarizerAskedInAll expects the summarizer to have been asked exactly N times over the whole scenario.
func (s *budgetSteps) summarizerAskedInAll(n int) error {
	if got := len(s.world.Summarizer().Requests()); got != n {
		return fail("the summarizer", fmt.Sprintf("%d calls", got), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// summarizerHandedTurn expects the summarizer to have been handed the words of turn N.
func (s *budgetSteps) summarizerHandedTurn(t int64) error {
	text, ok := s.turnText[t]
	if !ok {
		return harnessErr("the kit does not know the text of turn %d", t)
	}
	for _, r := range s.world.Summarizer().Requests() {
		for _, m := range r.Messages {
			if m.Content == text {
				return nil
			}
		}
	}
	return fail("the summarizer", fmt.Sprintf("%d calls without turn %d's words", len(s.world.Summarizer().Requests()), t), fmt.Sprintf("turn %d's words among what it was handed", t))
}

// requestCarriesSummary expects request N to the model to carry the summary text fenced in a user message.
func (s *budgetSteps) requestCarriesSummary(i int, text string) error {
	return s.expectSummary(i, unescape(text))
}

// requestCarriesThatSummary expects request N to the model to carry the last scripted summary, fenced.
func (s *budgetSteps) requestCarriesThatSummary(i int) error {
	return s.expectSummary(i, s.summary)
}

// requestCarriesSummaryPrefix expects request N to the model to carry the first N characters of the last scripted summary, fenced.
func (s *budgetSteps) requestCarriesSummaryPrefix(i, n int) error {
	return s.expectSummary(i, s.summary[:min(n, len(s.summary))])
}

// requestCarriesNoSummary expects request N to the model to carry no summary.
func (s *budgetSteps) requestCarriesNoSummary(i int) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	if got, ok := summaryOf(req.Messages); ok {
		return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("a summary %q", clip(got, 60)), "no summary")
	}
	return nil
}

// noSystemMessageHolds expects no system message of any request to the model to hold the text.
func (s *budgetSteps) noSystemMessageHolds(text string) error {
	for _, r := range s.world.Model().Requests() {
		for _, m := range r.Messages {
			if m.Role == "system" && strings.Contains(m.Content, unescape(text)) {
				return fail(fmt.Sprintf("request %d to the model", r.Index+1), "a system message holding "+text, "the summary only in user content")
			}
		}
	}
	return nil
}

// windowHoldsTurns expects the window of request N to the model to hold exactly the listed turns.
func (s *budgetSteps) windowHoldsTurns(i int, list string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	got := s.windowTurns(req.Messages)
	want := splitList(list)
	var from, to int
	if _, err := fmt.Sscanf(list, "%d to %d", &from, &to); err == nil {
		want = nil
		for t := from; t <= to; t++ {
			want = append(want, fmt.Sprint(t))
		}
	}
	if !slices.Equal(got, want) {
		return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("earlier turns %v", got), fmt.Sprintf("turns %v", want))
	}
	return nil
}

// requestHoldsNewestOf expects request N to the model to hold, before the text, the newest one
// or more of the listed turns (a run that ends with the last of them), each turn's question and
// reply exactly as the history has them, and nothing else: which of the runs is free.
func (s *budgetSteps) requestHoldsNewestOf(i int, list, text string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	turns := splitList(list)
	got := strings.Join(renderMessages(req.Messages), "\n")
	var runs []string
	for k := len(turns) - 1; k >= 0; k-- {
		var want []string
		for _, t := range turns[k:] {
			for _, m := range []string{"user: {turn " + t + "}", "assistant: {reply " + t + "}"} {
				line, err := s.expandMessage(m)
				if err != nil {
					return err
				}
				want = append(want, line)
			}
		}
		want = append(want, "user: "+unescape(text))
		if got == strings.Join(want, "\n") {
			return nil
		}
		runs = append(runs, strings.Join(turns[k:], ", "))
	}
	return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), clip(describeAll(req.Messages), 400),
		fmt.Sprintf("the questions and replies of turns %s, each whole, then %q", strings.Join(runs, " or of turns "), unescape(text)))
}

// sendsCharactersOf sends the text repeated N times, as one message, as who.
func (s *budgetSteps) sendsCharactersOf(who string, n int, ch string) error {
	return s.mustSend(who, strings.Repeat(ch, n), s.nextMessageID(), nil)
}

// killedRestartedWithSetting kills the system and restarts it with one setting changed.
func (s *budgetSteps) killedRestartedWithSetting(path, value string) error {
	if err := s.crash(); err != nil {
		return err
	}
	s.started = false
	if err := s.setSetting(path, value); err != nil {
		return err
	}
	s.started = true
	s.drv.Reconfigure(s.cfg)
	return s.restart()
}

// hasHadTurnsOfSize sends N messages of N characters as who and waits until each is answered.
func (s *budgetSteps) hasHadTurnsOfSize(who string, n, size int) error {
	for range n {
		s.turns++
		head := fmt.Sprintf("turn %d: ", s.turns)
		text := head + strings.Repeat("x", max(0, size-len(head)))
		s.longTexts = append(s.longTexts, text)
		if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
			return err
		}
		t, err := s.waitAnswered(who, text)
		if err != nil {
			return err
		}
		s.turnText[t] = text
	}
	return nil
}

// summarizerNeverHanded expects the summarizer never to have been handed the words.
func (s *budgetSteps) summarizerNeverHanded(text string) error {
	for _, r := range s.world.Summarizer().Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, unescape(text)) {
				return fail("the summarizer", "the words of a restricted turn", "only unrestricted turns")
			}
		}
	}
	return nil
}

func (s *budgetSteps) enqueue(n int, sums ...world.Summary) error {
	for range n {
		if err := s.world.Summarizer().Enqueue(sums...); err != nil {
			return harnessErr("script the summarizer: %v", err)
		}
	}
	return nil
}

// The summary fence of spec/prompt.md.
const (
	summaryOpen  = "<conversation-summary>\n"
	summaryClose = "\n</conversation-summary>"
)

// summaryOf returns the summary a request carries (the text inside the fence) and whether it
// carries one.
func summaryOf(msgs []world.Message) (string, bool) {
	for _, m := range msgs {
		if m.Role == "user" && strings.HasPrefix(m.Content, summaryOpen) && strings.HasSuffix(m.Content, summaryClose) {
			return strings.TrimSuffix(strings.TrimPrefix(m.Content, summaryOpen), summaryClose), true
		}
	}
	return "", false
}

// windowTurns maps the user messages of a request (not the summary, not the prompt) back to the
// turns whose text they carry.
func (s *scenario) windowTurns(msgs []world.Message) []string {
	var users []string
	for _, m := range msgs {
		if m.Role == "user" && !strings.HasPrefix(m.Content, summaryOpen) {
			users = append(users, m.Content)
		}
	}
	if len(users) > 0 {
		users = users[:len(users)-1]
	}
	var out []string
	for _, u := range users {
		n := "?"
		for t, text := range s.turnText {
			if text == u {
				n = fmt.Sprint(t)
			}
		}
		out = append(out, n)
	}
	return out
}

func (s *scenario) summaryText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz "
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteByte(alphabet[i%len(alphabet)])
	}
	return b.String()
}

func (s *scenario) expectSummary(i int, want string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	got, ok := summaryOf(req.Messages)
	if !ok || got != want {
		return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("summary %q (carried: %v)", clip(got, 80), ok),
			fmt.Sprintf("the summary %q in a user message fenced as spec/prompt.md says", clip(want, 80)))
	}
	return nil
}
