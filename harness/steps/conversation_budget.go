package steps

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// summarizerNotConfigured configures the system without a summarizer.
func (s *budgetSteps) summarizerNotConfigured() error {
	return s.configure(func(c *sutconfig.SUTConfig) { c.Summarizer.URL = "" })
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

// summarizerAnswersSummaryCharacters scripts the summarizer's next answer (or every answer) with a summary of N characters.
func (s *budgetSteps) summarizerAnswersSummaryCharacters(always string, size int) error {
	n := 1
	if always != "" {
		n = 50
	}
	s.summary = s.summaryText(size)
	return s.enqueue(n, world.Summary{Text: s.summary})
}

// summarizerAnswersSummaryOfUnit scripts the summarizer's next answer with the unit repeated N times.
func (s *budgetSteps) summarizerAnswersSummaryOfUnit(n int, unit string) error {
	s.summary = strings.Repeat(unescape(unit), n)
	return s.enqueue(1, world.Summary{Text: s.summary})
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

// requestCarriesSummaryCut expects request N to the model to carry the first N code points of
// the last scripted summary, fenced, once the kit's own trim (harness/oracle, spec/token-counting.md
// §6) to the given tokens is found to keep exactly that many.
func (s *budgetSteps) requestCarriesSummaryCut(i, kept, max int) error {
	want := oracle.TrimSummary(s.summary, max)
	if n := utf8.RuneCountInString(want); n != kept {
		return harnessErr("the kit's own trim keeps %d code points of the summary at maxSummaryTokens %d, the scenario says %d", n, max, kept)
	}
	return s.expectSummary(i, want)
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

// conversationBudgetVocabulary lists the steps of features/conversation/budget.feature.
func conversationBudgetVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the summarizer is not configured$`, a.budget.summarizerNotConfigured, "configures the system without a summarizer"},
		{`^the summarizer (always )?answers "((?:[^"\\]|\\.)*)"$`, a.budget.summarizerAnswers, "scripts the summarizer's next answer (or every answer) with the text"},
		{`^the summarizer (always )?answers a summary of (\d+) characters$`, a.budget.summarizerAnswersSummaryCharacters, "scripts the summarizer's next answer (or every answer) with a summary of N characters"},
		{`^the summarizer then (always )?fails with status (\d+)$`, a.budget.summarizerFails, "scripts the summarizer's next call (or every call) to fail with the status"},
		{`^summarizer request (\d+) holds the previous summary "((?:[^"\\]|\\.)*)" and the messages:$`, a.budget.summarizerRequestHolds, "expects summarizer request N to carry the previous summary and exactly the messages of the table"},
		{`^the summarizer has been asked (\d+) times?$`, a.budget.summarizerAsked, "waits until the summarizer has been asked at least N times"},
		{`^the summarizer has been asked (\d+) times? in all$`, a.budget.summarizerAskedInAll, "expects the summarizer to have been asked exactly N times over the whole scenario"},
		{`^the summarizer was handed the words of turn (\d+)$`, a.budget.summarizerHandedTurn, "expects the summarizer to have been handed the words of turn N"},
		{`^request (\d+) to the model carries the summary "((?:[^"\\]|\\.)*)" fenced in a user message$`, a.budget.requestCarriesSummary, "expects request N to the model to carry the summary text fenced in a user message"},
		{`^request (\d+) to the model carries that summary, fenced$`, a.budget.requestCarriesThatSummary, "expects request N to the model to carry the last scripted summary, fenced"},
		{`^request (\d+) to the model carries the first (\d+) characters of that summary, fenced$`, a.budget.requestCarriesSummaryPrefix, "expects request N to the model to carry the first N characters of the last scripted summary, fenced"},
		{`^the summarizer answers a summary of (\d+) "((?:[^"\\]|\\.)*)" characters$`, a.budget.summarizerAnswersSummaryOfUnit, "scripts the summarizer's next answer with the unit repeated N times"},
		{`^request (\d+) to the model carries the first (\d+) characters of that summary, as the kit trims it to (\d+) tokens, fenced$`, a.budget.requestCarriesSummaryCut, "expects request N to carry the first N code points of the last scripted summary, fenced, which the kit's own trim to the given tokens keeps"},
		{`^request (\d+) to the model carries no summary$`, a.budget.requestCarriesNoSummary, "expects request N to the model to carry no summary"},
		{`^no system message of any request to the model holds "((?:[^"\\]|\\.)*)"$`, a.budget.noSystemMessageHolds, "expects no system message of any request to the model to hold the text"},
		{`^the window of request (\d+) to the model holds turns (.+)$`, a.budget.windowHoldsTurns, "expects the window of request N to the model to hold exactly the listed turns"},
		{`^(\w[\w' ]*?) sends (\d+) characters of "([^"]+)"$`, a.budget.sendsCharactersOf, "sends the text repeated N times, as one message, as who"},
		{`^the system is killed and restarted with the setting "([^"]+)" at (.+)$`, a.budget.killedRestartedWithSetting, "kills the system and restarts it with one setting changed"},
		{`^(\w[\w' ]*?) has had (\d+) turns of (\d+) characters answered$`, a.budget.hasHadTurnsOfSize, "sends N messages of N characters as who and waits until each is answered"},
	}
}
