package steps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// inDoubtReportedOnce expects exactly one error-hook report about the call in doubt of the
// turn: a report under the failed reply's errorId, one naming the call's Idempotency-Key, and one
// about that turn of the conversation all count. That one is under the reply's errorId and names
// the tool and the key the tool server saw on call n of the tool.
func (s *failuresSteps) inDoubtReportedOnce(turn int64, tool string, n int) error {
	calls := s.world.Tools().CallsOf(tool)
	if n < 1 || n > len(calls) {
		return fail("the tool "+tool, fmt.Sprintf("%d calls", len(calls)), fmt.Sprintf("a call %d", n))
	}
	key := calls[n-1].IdempotencyKey
	if key == "" {
		return fail("the tool "+tool, fmt.Sprintf("call %d without an Idempotency-Key", n), "a call with its key")
	}
	e, err := s.waitReply(turn)
	if err != nil {
		return err
	}
	if e.ErrorID == "" {
		return fail(fmt.Sprintf("turn %d", turn), "no errorId", "a failed turn with an errorId")
	}
	under := func(r world.ErrorReport) bool { return r.ErrorID == e.ErrorID }
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(s.world.ErrorHook().Errors(), under) {
		select {
		case <-ctx.Done():
			return fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), e.ErrorID), "a report of the call in doubt")
		case <-tick.C:
		}
	}
	var about []world.ErrorReport
	for _, r := range s.world.ErrorHook().Errors() {
		if under(r) || (key != "" && strings.Contains(r.Error, key)) || (r.ConversationID == s.current.id && int64(r.Turn) == turn) {
			about = append(about, r)
		}
	}
	want := fmt.Sprintf("one report under errorId %s naming %s and %s", e.ErrorID, tool, key)
	if len(about) != 1 {
		ids := make([]string, len(about))
		for i, r := range about {
			ids[i] = r.ErrorID
		}
		return fail("the error hook", fmt.Sprintf("%d reports about the call: %s", len(about), strings.Join(ids, ", ")), want)
	}
	if r := about[0]; !under(r) || !strings.Contains(r.Error, tool) || !strings.Contains(r.Error, key) {
		return fail("the error hook", fmt.Sprintf("%+v", r), want)
	}
	return nil
}

// carriedArguments expects every call of the tool to have carried the arguments.
func (s *agentSteps) carriedArguments(name, args string) error {
	calls := s.world.Tools().CallsOf(name)
	if len(calls) == 0 {
		return fail("the tool "+name, "no calls", "calls with the arguments "+args)
	}
	want := canonJSON(args)
	for i, c := range calls {
		if got := canonJSON(string(c.Args)); got != want {
			return fail(fmt.Sprintf("call %d to %s", i+1, name), got, want+", the arguments the model asked for")
		}
	}
	return nil
}

// holdsToolResult expects request N to the model to hold a tool result with the text.
func (s *agentSteps) holdsToolResult(i int, text string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	for _, m := range req.Messages {
		if m.Role == "tool" && containsFold(m.Content, unescape(text)) {
			return nil
		}
	}
	return fail(fmt.Sprintf("request %d to the model", i), describeMessages(req.Messages), fmt.Sprintf("a tool message saying %q", text))
}

// agentLoopVocabulary lists the steps of features/agent/loop.feature.
func agentLoopVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the error hook was told about the call in doubt of turn (\d+) once, under its error id, naming "([\w-]+)" and the idempotency key of its call (\d+)$`, a.failures.inDoubtReportedOnce, "expects exactly one error-hook report about the call in doubt (one under the turn's errorId, naming the tool or its Idempotency-Key, or about that turn): the one under the turn's errorId, naming both (spec/http.md, Runs: A call in doubt)"},
		{`^every call to "([\w-]+)" carried the arguments (\{.*\})$`, a.agent.carriedArguments, "expects every call of the tool to have carried the arguments"},
		{`^request (\d+) to the model holds a tool result that says "((?:[^"\\]|\\.)*)"$`, a.agent.holdsToolResult, "expects request N to the model to hold a tool result with the text"},
	}
}
