package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

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

func (s *scenario) registerBudget(sc *godog.ScenarioContext) {
	sc.Step(`^the summarizer is not configured$`, func() error {
		return s.configure(func(c *spec.SUTConfig) { c.Summarizer.URL = "" })
	})
	enqueue := func(n int, sums ...world.Summary) error {
		for range n {
			if err := s.world.Summarizer().Enqueue(sums...); err != nil {
				return harnessErr("script the summarizer: %v", err)
			}
		}
		return nil
	}
	sc.Step(`^the summarizer (always )?answers "((?:[^"\\]|\\.)*)"$`, func(always, text string) error {
		n := 1
		if always != "" {
			n = 50
		}
		s.summary = unescape(text)
		return enqueue(n, world.Summary{Text: s.summary})
	})
	sc.Step(`^the summarizer (always )?answers a summary of (\d+) characters$`, func(always string, size int) error {
		n := 1
		if always != "" {
			n = 50
		}
		s.summary = s.summaryText(size)
		return enqueue(n, world.Summary{Text: s.summary})
	})
	sc.Step(`^the summarizer then (always )?fails with status (\d+)$`, func(always string, status int) error {
		n := 1
		if always != "" {
			n = 50
		}
		return enqueue(n, world.Summary{Fail: &world.Failure{Status: status, Message: "summarizer down"}})
	})
	sc.Step(`^summarizer request (\d+) holds the previous summary "((?:[^"\\]|\\.)*)" and the messages:$`, func(i int, prev string, t *godog.Table) error {
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
	})
	sc.Step(`^the summarizer has been asked (\d+) times?$`, func(n int) error {
		ctx, cancel := s.wait()
		defer cancel()
		if err := s.world.Summarizer().WaitRequests(ctx, n); err != nil {
			return fail("the summarizer", fmt.Sprintf("%d calls", len(s.world.Summarizer().Requests())), fmt.Sprintf("at least %d", n))
		}
		return nil
	})
	sc.Step(`^the summarizer has been asked (\d+) times? in all$`, func(n int) error {
		if got := len(s.world.Summarizer().Requests()); got != n {
			return fail("the summarizer", fmt.Sprintf("%d calls", got), fmt.Sprintf("exactly %d", n))
		}
		return nil
	})
	sc.Step(`^the summarizer was handed the words of turn (\d+)$`, func(t int64) error {
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
	})
	sc.Step(`^request (\d+) to the model carries the summary "((?:[^"\\]|\\.)*)" fenced in a user message$`, func(i int, text string) error {
		return s.expectSummary(i, unescape(text))
	})
	sc.Step(`^request (\d+) to the model carries that summary, fenced$`, func(i int) error {
		return s.expectSummary(i, s.summary)
	})
	sc.Step(`^request (\d+) to the model carries the first (\d+) characters of that summary, fenced$`, func(i, n int) error {
		return s.expectSummary(i, s.summary[:min(n, len(s.summary))])
	})
	sc.Step(`^request (\d+) to the model carries no summary$`, func(i int) error {
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		if got, ok := summaryOf(req.Messages); ok {
			return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("a summary %q", clip(got, 60)), "no summary")
		}
		return nil
	})
	sc.Step(`^no system message of any request to the model holds "((?:[^"\\]|\\.)*)"$`, func(text string) error {
		for _, r := range s.world.Model().Requests() {
			for _, m := range r.Messages {
				if m.Role == "system" && strings.Contains(m.Content, unescape(text)) {
					return fail(fmt.Sprintf("request %d to the model", r.Index+1), "a system message holding "+text, "the summary only in user content")
				}
			}
		}
		return nil
	})
	sc.Step(`^the window of request (\d+) to the model holds turns (.+)$`, func(i int, list string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) sends (\d+) characters of "([^"]+)"$`, func(who string, n int, ch string) error {
		return s.mustSend(who, strings.Repeat(ch, n), s.nextMessageID(), nil)
	})
	sc.Step(`^the system is killed and restarted with the setting "([^"]+)" at (.+)$`, func(path, value string) error {
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
	})
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
