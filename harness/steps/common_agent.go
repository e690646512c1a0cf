package steps

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// memoryHeldWhenRecalled expects who's memory to have held exactly the table when the turn recalled it.
func (s *agentSteps) memoryHeldWhenRecalled(who, text string, t *godog.Table) error {
	return s.memoryHeldAtRecall(who, unescape(text), t)
}

// agentHasMemory configures the agent with the world's memory service.
func (s *agentSteps) agentHasMemory() error {
	return s.configure(func(c *sutconfig.SUTConfig) { c.Memory.URL = s.world.URL() })
}

// memoryHolds puts the text into who's memory.
func (s *agentSteps) memoryHolds(who, text string) error {
	p := principals[who]
	scope := identityKey(p.Tenant, p.Actor, p.OnBehalfOf)
	if err := s.world.Memory().Seed(scope, unescape(text)); err != nil {
		return harnessErr("memory: %v", err)
	}
	return nil
}

// toolAnswers scripts the tool's next answer.
func (s *agentSteps) toolAnswers(name, raw string) error {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return harnessErr("the answer of %s is not JSON: %s", name, raw)
	}
	if err := s.declareTool(name); err != nil {
		return err
	}
	if err := s.world.Tools().Define(name, world.Behavior{Result: v}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// toolAnswersNext scripts the answer of the tool's next call alone; later calls take what follows
// in its queue, then its default answer.
func (s *agentSteps) toolAnswersNext(name, raw string) error {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return harnessErr("the answer of %s is not JSON: %s", name, raw)
	}
	if err := s.declareTool(name); err != nil {
		return err
	}
	if err := s.world.Tools().Enqueue(name, world.Behavior{Result: v}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// toolWaits scripts the tool's next call to wait until released.
func (s *agentSteps) toolWaits(name string) error {
	if err := s.declareTool(name); err != nil {
		return err
	}
	h := s.world.NewHold()
	s.toolHolds[name] = append(s.toolHolds[name], h)
	if err := s.world.Tools().Enqueue(name, world.Behavior{Hold: h, Result: map[string]any{"ok": true}}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// lateRelease is how long after the moment a "has been waiting N ms" step waited for the kit may
// release the tool and still stand by the scenario's timing: every scenario that releases a tool
// after such a step leaves the system at least this much room before any deadline it judges.
const lateRelease = 250 * time.Millisecond

// toolReleased releases every call of the tool that waits. After a "has been waiting N ms" step
// the release must come within lateRelease of the moment it waited for: a kit slowed past that
// (a busy machine) released the tool later than the scenario says, so what follows cannot be
// judged, and that is the kit's fault (a harness error), not the system's.
func (s *agentSteps) toolReleased(name string) error {
	for _, h := range s.toolHolds[name] {
		h.Release()
	}
	if until, ok := s.waitedUntil[name]; ok {
		delete(s.waitedUntil, name)
		if late := time.Since(until); late > lateRelease {
			return harnessErr("the kit released the tool %q %s after the moment its wait step waited for (a busy machine?): the scenario's timing no longer holds",
				name, late.Round(time.Millisecond))
		}
	}
	return nil
}

// toolNeedsApproval declares the tool to the system as one that needs approval.
func (s *agentSteps) toolNeedsApproval(name string) error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		c.Tools.Definitions = append(c.Tools.Definitions, sutconfig.ToolDef{Name: name, Description: "a destructive tool",
			Parameters: map[string]any{"type": "object"}, NeedsApproval: true})
	})
}

// toolCalled waits until the tool has been called at least N times.
func (s *agentSteps) toolCalled(name string, n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Tools().WaitCallsOf(ctx, name, n); err != nil {
		return fail("the tool "+name, fmt.Sprintf("%d calls", len(s.world.Tools().CallsOf(name))), fmt.Sprintf("at least %d", n))
	}
	return nil
}

// toolCalledInAll expects the tool to have been called exactly N times over the whole scenario.
func (s *agentSteps) toolCalledInAll(name string, n int) error {
	if got := len(s.world.Tools().CallsOf(name)); got != n {
		return fail("the tool "+name, fmt.Sprintf("%d calls", got), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// toolAnswered waits until N calls of the tool have ended.
func (s *agentSteps) toolAnswered(name string, n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.toolsEnded(name) < n {
		select {
		case <-ctx.Done():
			return fail("the tool "+name, fmt.Sprintf("%d answered calls", s.toolsEnded(name)), fmt.Sprintf("%d", n))
		case <-tick.C:
		}
	}
	if got := s.toolsEnded(name); got != n {
		return fail("the tool "+name, fmt.Sprintf("%d answered calls", got), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// toolNeverCalled expects the tool never to have been called.
func (s *agentSteps) toolNeverCalled(name string) error {
	if got := len(s.world.Tools().CallsOf(name)); got != 0 {
		return fail("the tool "+name, fmt.Sprintf("%d calls", got), "none")
	}
	return nil
}

// sameIdempotencyKey expects every call of the tool to have carried one idempotency key.
func (s *agentSteps) sameIdempotencyKey(name string) error {
	calls := s.world.Tools().CallsOf(name)
	if len(calls) == 0 {
		return fail("the tool "+name, "no calls", "calls with an Idempotency-Key")
	}
	key := calls[0].IdempotencyKey
	for i, c := range calls {
		if c.IdempotencyKey == "" || c.IdempotencyKey != key {
			return fail(fmt.Sprintf("call %d to %s", i+1, name), fmt.Sprintf("Idempotency-Key %q", c.IdempotencyKey), fmt.Sprintf("%q as on the first call", key))
		}
	}
	return nil
}

// ownIdempotencyKeys expects every call of the tool to have carried an idempotency key that no
// other call of it carried.
func (s *agentSteps) ownIdempotencyKeys(name string) error {
	calls := s.world.Tools().CallsOf(name)
	if len(calls) < 2 {
		return fail("the tool "+name, fmt.Sprintf("%d calls", len(calls)), "at least 2 calls")
	}
	first := map[string]int{}
	for i, c := range calls {
		if c.IdempotencyKey == "" {
			return fail(fmt.Sprintf("call %d to %s", i+1, name), "no Idempotency-Key", "a key of its own")
		}
		if j, ok := first[c.IdempotencyKey]; ok {
			return fail(fmt.Sprintf("call %d to %s", i+1, name), fmt.Sprintf("Idempotency-Key %q, as call %d", c.IdempotencyKey, j+1), "a key of its own")
		}
		first[c.IdempotencyKey] = i
	}
	return nil
}

// toolFailsLong scripts the tool's next call to fail with the status and N characters of the text.
func (s *agentSteps) toolFailsLong(name string, status, n int, ch, tail string) error {
	if err := s.declareTool(name); err != nil {
		return err
	}
	msg := strings.Repeat(ch, n) + tail
	s.saved["tool message"] = msg
	s.saved["tool message of"] = name
	if err := s.world.Tools().Enqueue(name, world.Behavior{Fail: &world.Failure{Status: status, Message: msg}}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// toolMessageCut expects request N to the model to hold the tool message cut to its first n
// characters (Unicode code points, spec/prompt.md).
func (s *agentSteps) toolMessageCut(i, n int) error {
	msg := []rune(s.saved["tool message"])
	msg = msg[:min(n, len(msg))]
	// A failure fed back is fenced as data under its tool's name (spec/http.md, Runs: tool
	// failures and authority).
	b, _ := json.Marshal(map[string]any{"untrusted": map[string]any{
		"source": "tool-error:" + s.saved["tool message of"], "data": map[string]string{"error": string(msg)}}})
	want := canonJSON(string(b))
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			if got := canonJSON(m.Content); got != want {
				return fail(fmt.Sprintf("the tool message of request %d to the model", i), clip(got, 80)+fmt.Sprintf(" (%d bytes)", len(m.Content)),
					fmt.Sprintf("{\"untrusted\": {\"source\": \"tool-error:%s\", \"data\": {\"error\": the tool's message cut to its first %d characters}}} (spec/prompt.md)", s.saved["tool message of"], len(msg)))
			}
			return nil
		}
	}
	return fail(fmt.Sprintf("request %d to the model", i), describeMessages(req.Messages), "a tool message")
}

// holdsToolError expects request N to the model to hold a tool error for the tool.
func (s *agentSteps) holdsToolError(i int, name string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	lines := renderMessages(req.Messages)
	for j, m := range req.Messages {
		if m.Role != "tool" || !strings.HasSuffix(lines[j], "[for "+name+"]") {
			continue
		}
		var e struct {
			Error *string `json:"error"`
		}
		if json.Unmarshal([]byte(m.Content), &e) != nil || e.Error == nil || *e.Error == "" {
			return fail(fmt.Sprintf("the tool message for %s in request %d to the model", name, i), m.Content, `{"error": "<why>"}: a failure the model can read`)
		}
		return nil
	}
	return fail(fmt.Sprintf("request %d to the model", i), strings.Join(lines, " | "), "a tool message answering the call to "+name)
}

// toolResultsInOrder expects request N to the model to hold the tool results in the listed order.
func (s *agentSteps) toolResultsInOrder(i int, order string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	names := map[string]string{}
	var got []string
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
		if m.Role == "tool" {
			got = append(got, names[m.ToolCallID])
		}
	}
	want := splitList(order)
	if !slices.Equal(got, want) {
		return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("tool results in the order %v", got), fmt.Sprintf("%v", want))
	}
	return nil
}

// memoryScope is the memory scope of a principal (spec/world.md): its identity key.
func memoryScope(who string) string {
	p := principals[who]
	return identityKey(p.Tenant, p.Actor, p.OnBehalfOf)
}

// memoryHeldAtRecall waits for the recall of who's scope that the turn whose prompt is text makes
// (the sentinel: a system makes a turn's write-back before the conversation's next turn recalls,
// spec/world.md), then compares what the scope held when that recall arrived with the table, entry
// for entry. A write-back made twice, or one that should not have been made, cannot come too late
// to be seen, as long as it belongs to a turn before that one. Each entry must carry an id, and no
// write-back may have gone to another scope.
func (s *scenario) memoryHeldAtRecall(who, text string, t *godog.Table) error {
	if _, ok := principals[who]; !ok {
		return harnessErr("unknown principal %q", who)
	}
	if t == nil || len(t.Rows) < 2 {
		return harnessErr("the table needs a header and at least one entry")
	}
	scope := memoryScope(who)
	var want []string
	for _, row := range t.Rows[1:] {
		want = append(want, row.Cells[0].Value+": "+unescape(row.Cells[1].Value))
	}
	find := func() (world.MemoryRecall, bool) {
		for _, r := range s.world.Memory().Recalls() {
			if r.Scope == scope && strings.Contains(r.Query, text) {
				return r, true
			}
		}
		return world.MemoryRecall{}, false
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	rec, ok := find()
	for !ok {
		select {
		case <-ctx.Done():
			return fail("the memory of "+scope, fmt.Sprintf("%d recalls, none for the turn %q", len(s.world.Memory().Recalls()), text),
				fmt.Sprintf("a recall of the scope by the turn %q", text))
		case <-tick.C:
		}
		rec, ok = find()
	}
	var got []string
	for _, e := range rec.Held {
		if e.ID == "" {
			return fail("the memory of "+scope, fmt.Sprintf("an entry without an id (%s: %q)", e.Role, clip(e.Text, 40)), "deterministic entry ids, so a replayed write-back is skipped")
		}
		got = append(got, e.Role+": "+e.Text)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail("the memory of "+scope+fmt.Sprintf(" when the turn %q recalled it", text), "\n"+strings.Join(got, "\n"), "\n"+strings.Join(want, "\n"))
	}
	for _, w := range s.world.Memory().Writes() {
		if w.Scope != scope {
			return fail("a memory write-back", "one to the scope "+w.Scope, "write-backs only to the asker's scope "+scope)
		}
	}
	return nil
}

// declareTool makes sure the SUT's configuration declares the tool (scripting a tool implies it).
func (s *scenario) declareTool(name string) error {
	for _, d := range s.cfg.Tools.Definitions {
		if d.Name == name {
			return nil
		}
	}
	if s.started {
		return harnessErr("the tool %q is not one of the standard tools; script it before the system starts", name)
	}
	return s.configure(func(c *sutconfig.SUTConfig) {
		c.Tools.Definitions = append(c.Tools.Definitions, sutconfig.ToolDef{Name: name, Description: "the " + name + " tool",
			Parameters: map[string]any{"type": "object"}})
	})
}

func (s *scenario) toolsEnded(name string) (answered int) {
	for _, c := range s.world.Tools().CallsOf(name) {
		if c.Status >= 200 && c.Status < 300 {
			answered++
		}
	}
	return answered
}

// commonAgentVocabulary lists the steps that several features share (agent).
func commonAgentVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the run was ended by "([\w-]+)" raising "(\w+)" as "([\w:]+)" at depth (\d+)$`, a.failures.endedByTerminal, "expects the ended run's terminal failure to be exactly the tool, the failure's class, the class that made it terminal and its depth, as the kit classifies the scripted failure"},
		{`^(\w[\w' ]*?)'s memory held exactly, when the turn "((?:[^"\\]|\\.)*)" recalled it:$`, a.agent.memoryHeldWhenRecalled, "expects who's memory to have held exactly the table when the turn recalled it"},
		{`^the agent has memory$`, a.agent.agentHasMemory, "configures the agent with the world's memory service"},
		{`^(\w+)'s memory holds "((?:[^"\\]|\\.)*)"$`, a.agent.memoryHolds, "puts the text into who's memory"},
		{`^the tool "([\w-]+)" answers (.+)$`, a.agent.toolAnswers, "scripts the tool's next answer"},
		{`^the next call of the tool "([\w-]+)" answers (\{.*\})$`, a.agent.toolAnswersNext, "scripts the answer of the tool's next call alone (queued after the calls scripted before it)"},
		{`^the tool "([\w-]+)" waits$`, a.agent.toolWaits, "scripts the tool's next call to wait until released"},
		{`^the tool "([\w-]+)" is released$`, a.agent.toolReleased, "releases every call of the tool that waits"},
		{`^the tool "([\w-]+)" needs approval$`, a.agent.toolNeedsApproval, "declares the tool to the system as one that needs approval"},
		{`^the tool "([\w-]+)" has been called (\d+) times?$`, a.agent.toolCalled, "waits until the tool has been called at least N times"},
		{`^the tool "([\w-]+)" has been called (\d+) times? in all$`, a.agent.toolCalledInAll, "expects the tool to have been called exactly N times over the whole scenario"},
		{`^the tool "([\w-]+)" answered (\d+) times?$`, a.agent.toolAnswered, "waits until N calls of the tool have ended"},
		{`^the tool "([\w-]+)" was never called$`, a.agent.toolNeverCalled, "expects the tool never to have been called"},
		{`^every call to "([\w-]+)" carried the same idempotency key$`, a.agent.sameIdempotencyKey, "expects every call of the tool to have carried one idempotency key"},
		{`^every call to "([\w-]+)" carried an idempotency key of its own$`, a.agent.ownIdempotencyKeys, "expects the tool to have been called at least twice, every call under an Idempotency-Key no other call of it carried"},
		{`^the tool "([\w-]+)" fails with status (\d+) and says (\d+) characters of "([^"]+)"(?: and then "([^"]*)")?$`, a.agent.toolFailsLong, "scripts the tool's next call to fail with the status and N characters of the text"},
		{`^request (\d+) to the model holds that tool message cut to (\d+) characters$`, a.agent.toolMessageCut, "expects request N to the model to hold the tool message cut to its first N characters (Unicode code points)"},
		{`^request (\d+) to the model holds a tool error for "([\w-]+)"$`, a.agent.holdsToolError, "expects request N to the model to hold a tool error for the tool"},
		{`^request (\d+) to the model holds the tool results in the order (.+)$`, a.agent.toolResultsInOrder, "expects request N to the model to hold the tool results in the listed order"},
	}
}

// terminalView is the terminal member of a run (spec/http.md, Runs: tool failures).
type terminalView struct {
	Tool    string `json:"tool"`
	Class   string `json:"class"`
	Failure string `json:"failure"`
	Depth   int    `json:"depth"`
}

// retryableFalse is what a terminal view names as the class when an ordinary class said
// retryable: false.
const retryableFalse = "retryable:false"

// classify is the kit's own reading of the record: the shallowest failure of the chain, at depth
// 0 to world.CauseDepth, whose class or an ancestor is terminal, or that says retryable false.
func classify(e *world.ToolError) (terminalView, bool) {
	terminal := map[string]bool{}
	for _, c := range world.TerminalClasses {
		terminal[c] = true
	}
	for c, d := e, 0; c != nil && d <= world.CauseDepth; c, d = c.Cause, d+1 {
		if terminal[c.Class] {
			return terminalView{Class: c.Class, Failure: c.Class, Depth: d}, true
		}
		for _, a := range c.Extends {
			if terminal[a] {
				return terminalView{Class: a, Failure: c.Class, Depth: d}, true
			}
		}
		if c.Retryable != nil && !*c.Retryable {
			return terminalView{Class: retryableFalse, Failure: c.Class, Depth: d}, true
		}
	}
	return terminalView{}, false
}

// endedTerminal reads the terminal member of the ended run (nil when it has none).
func (s *failuresSteps) endedTerminal() (*terminalView, error) {
	if _, err := s.areas.runs.endedRun(); err != nil {
		return nil, err
	}
	var v struct {
		Terminal *terminalView `json:"terminal"`
	}
	if err := json.Unmarshal(s.areas.runs.endedBody, &v); err != nil {
		return nil, fail("GET "+runPath(s.areas.runs.runID, ""), clip(string(s.areas.runs.endedBody), 200), "a run")
	}
	return v.Terminal, nil
}

// endedByTerminal expects the ended run's terminal failure to be exactly the tool, the failure's
// class, the class that made it terminal and its depth, as the kit classifies the scripted failure.
func (s *failuresSteps) endedByTerminal(tool, failure, class string, depth int) error {
	want := terminalView{Tool: tool, Class: class, Failure: failure, Depth: depth}
	if scripted := s.lastFailure[tool]; scripted != nil {
		kit, ok := classify(scripted)
		kit.Tool = tool
		if !ok || kit != want || !scripted.Terminal() {
			return harnessErr("the scenario expects %+v, but the kit classifies the failure scripted for %s as %+v (terminal %v)", want, tool, kit, ok)
		}
	} else if want != (terminalView{Tool: tool, Class: world.ClassIdempotentToolRefused, Failure: world.ClassIdempotentToolRefused}) {
		// No failure was scripted: the only terminal stop a system raises of its own is the
		// single-frame runner's refusal of a tool declared not idempotent.
		return harnessErr("no failure was scripted for %s, and %+v is not the single-frame refusal", tool, want)
	}
	got, err := s.endedTerminal()
	if err != nil {
		return err
	}
	op := "GET " + runPath(s.areas.runs.runID, "") + ": the terminal failure"
	if got == nil {
		return fail(op, "none: "+clip(string(s.areas.runs.endedBody), 300), fmt.Sprintf("%+v", want))
	}
	if *got != want {
		return fail(op, fmt.Sprintf("%+v", *got), fmt.Sprintf("%+v", want))
	}
	return nil
}
