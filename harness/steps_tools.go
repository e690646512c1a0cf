package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

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
	return s.configure(func(c *spec.SUTConfig) {
		c.Tools.Definitions = append(c.Tools.Definitions, spec.ToolDef{Name: name, Description: "the " + name + " tool",
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

func (s *scenario) registerTools(sc *godog.ScenarioContext) {
	sc.Step(`^the tool "([\w-]+)" answers (.+)$`, func(name, raw string) error {
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
	})
	sc.Step(`^the tool "([\w-]+)" fails with status (\d+) and says "((?:[^"\\]|\\.)*)"$`, func(name string, status int, msg string) error {
		if err := s.declareTool(name); err != nil {
			return err
		}
		if err := s.world.Tools().Enqueue(name, world.Behavior{Fail: &world.Failure{Status: status, Message: unescape(msg)}}); err != nil {
			return harnessErr("script the tool: %v", err)
		}
		return nil
	})
	sc.Step(`^the tool "([\w-]+)" waits$`, func(name string) error {
		if err := s.declareTool(name); err != nil {
			return err
		}
		h := s.world.NewHold()
		s.toolHolds[name] = append(s.toolHolds[name], h)
		if err := s.world.Tools().Enqueue(name, world.Behavior{Hold: h, Result: map[string]any{"ok": true}}); err != nil {
			return harnessErr("script the tool: %v", err)
		}
		return nil
	})
	sc.Step(`^the tool "([\w-]+)" is released$`, func(name string) error {
		for _, h := range s.toolHolds[name] {
			h.Release()
		}
		return nil
	})
	sc.Step(`^the tool "([\w-]+)" needs approval$`, func(name string) error {
		return s.configure(func(c *spec.SUTConfig) {
			c.Tools.Definitions = append(c.Tools.Definitions, spec.ToolDef{Name: name, Description: "a destructive tool",
				Parameters: map[string]any{"type": "object"}, NeedsApproval: true})
		})
	})
	sc.Step(`^the tool "([\w-]+)" has been called (\d+) times?$`, func(name string, n int) error {
		ctx, cancel := s.wait()
		defer cancel()
		if err := s.world.Tools().WaitCallsOf(ctx, name, n); err != nil {
			return fail("the tool "+name, fmt.Sprintf("%d calls", len(s.world.Tools().CallsOf(name))), fmt.Sprintf("at least %d", n))
		}
		return nil
	})
	sc.Step(`^the tool "([\w-]+)" has been called (\d+) times? in all$`, func(name string, n int) error {
		if got := len(s.world.Tools().CallsOf(name)); got != n {
			return fail("the tool "+name, fmt.Sprintf("%d calls", got), fmt.Sprintf("exactly %d", n))
		}
		return nil
	})
	sc.Step(`^the tool "([\w-]+)" answered (\d+) times?$`, func(name string, n int) error {
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
	})
	sc.Step(`^the tool "([\w-]+)" was never called$`, func(name string) error {
		if got := len(s.world.Tools().CallsOf(name)); got != 0 {
			return fail("the tool "+name, fmt.Sprintf("%d calls", got), "none")
		}
		return nil
	})
	sc.Step(`^every call to "([\w-]+)" carried the same idempotency key$`, func(name string) error {
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
	})
	sc.Step(`^the tool "([\w-]+)" fails with status (\d+) and says (\d+) characters of "([^"]+)"(?: and then "([^"]*)")?$`, func(name string, status, n int, ch, tail string) error {
		if err := s.declareTool(name); err != nil {
			return err
		}
		msg := strings.Repeat(ch, n) + tail
		s.saved["tool message"] = msg
		if err := s.world.Tools().Enqueue(name, world.Behavior{Fail: &world.Failure{Status: status, Message: msg}}); err != nil {
			return harnessErr("script the tool: %v", err)
		}
		return nil
	})
	sc.Step(`^request (\d+) to the model holds that tool message cut to (\d+) bytes$`, func(i, n int) error {
		// The longest prefix of at most n bytes that ends at a character boundary.
		msg := s.saved["tool message"]
		cut := min(n, len(msg))
		for cut > 0 && cut < len(msg) && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
		b, _ := json.Marshal(map[string]string{"error": msg})
		want := canonJSON(string(b))
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		for _, m := range req.Messages {
			if m.Role == "tool" {
				if got := canonJSON(m.Content); got != want {
					return fail(fmt.Sprintf("the tool message of request %d to the model", i), clip(got, 80)+fmt.Sprintf(" (%d bytes)", len(m.Content)),
						fmt.Sprintf("{\"error\": the tool's message cut to %d bytes at a character boundary} (spec/prompt.md)", len(msg)))
				}
				return nil
			}
		}
		return fail(fmt.Sprintf("request %d to the model", i), describeMessages(req.Messages), "a tool message")
	})
	sc.Step(`^request (\d+) to the model holds a tool error for "([\w-]+)"$`, func(i int, name string) error {
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
	})
	sc.Step(`^every call to "([\w-]+)" carried the arguments (\{.*\})$`, func(name, args string) error {
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
	})
	sc.Step(`^request (\d+) to the model holds a tool result that says "((?:[^"\\]|\\.)*)"$`, func(i int, text string) error {
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
	})
	sc.Step(`^request (\d+) to the model holds the tool results in the order (.+)$`, func(i int, order string) error {
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
	})
}
