package harness

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

var quotedRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// quoted returns the quoted strings of s, with \" and \n unescaped.
func quoted(s string) []string {
	var out []string
	for _, m := range quotedRE.FindAllStringSubmatch(s, -1) {
		out = append(out, unescape(m[1]))
	}
	return out
}

func unescape(s string) string {
	return strings.NewReplacer(`\"`, `"`, `\n`, "\n", `\r`, "\r", `\\`, `\`).Replace(s)
}

func (s *scenario) enqueue(r world.Reply) error {
	if err := s.world.Model().Enqueue(r); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

func (s *scenario) registerModel(sc *godog.ScenarioContext) {
	sc.Step(`^the model replies "((?:[^"\\]|\\.)*)"$`, func(text string) error {
		return s.enqueue(world.Reply{Text: unescape(text)})
	})
	sc.Step(`^the model replies "((?:[^"\\]|\\.)*)" to "((?:[^"\\]|\\.)*)"$`, func(text, match string) error {
		if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Text: unescape(text)}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		return nil
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+)$`, func(parts string) error {
		return s.enqueue(world.Reply{Chunks: quoted(parts)})
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) with (.+)$`, func(parts, form string) error {
		r := world.Reply{Chunks: quoted(parts)}
		switch form {
		case "a keep-alive comment before every event":
			r.KeepAlive = true
		case "every event's data spread over several lines":
			r.MultiLine = true
		case "a usage-only chunk before the end":
			r.UsageChunk = true
		case "a plain JSON answer instead of a stream":
			r.Plain = true
		case "every stream form at once":
			r.KeepAlive, r.MultiLine, r.UsageChunk = true, true, true
		default:
			return harnessErr("unknown form of a model answer %q", form)
		}
		return s.enqueue(r)
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) and waits$`, func(parts string) error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		return s.enqueue(world.Reply{Chunks: quoted(parts), Hold: h})
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" and waits$`, func(parts, match string) error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Chunks: quoted(parts), Hold: h}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		return nil
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" and waits, then streams "((?:[^"\\]|\\.)*)"$`, func(parts, match, more string) error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Chunks: quoted(parts), Hold: h, After: []string{unescape(more)}}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		return nil
	})
	sc.Step(`^the model is released$`, func() error {
		for _, h := range s.holds {
			h.Release()
		}
		return nil
	})
	sc.Step(`^the model fails with status (\d+)(?: and says "((?:[^"\\]|\\.)*)")?$`, func(status int, msg string) error {
		return s.enqueue(world.Reply{Fail: &world.Failure{Status: status, Message: unescape(msg)}})
	})
	sc.Step(`^the model calls "([\w-]+)" with (\{.*\})$`, func(name, args string) error {
		return s.enqueue(world.Reply{ToolCalls: []world.ToolCall{{ID: s.callID(), Name: name, Arguments: args}}})
	})
	sc.Step(`^the model calls "([\w-]+)" (\d+) times in a row$`, func(name string, n int) error {
		for range n {
			if err := s.enqueue(world.Reply{ToolCalls: []world.ToolCall{{ID: s.callID(), Name: name, Arguments: "{}"}}}); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^the model calls at once:$`, func(t *godog.Table) error {
		var calls []world.ToolCall
		for _, row := range t.Rows[1:] {
			args := "{}"
			if len(row.Cells) > 1 {
				args = row.Cells[1].Value
			}
			calls = append(calls, world.ToolCall{ID: s.callID(), Name: row.Cells[0].Value, Arguments: args})
		}
		return s.enqueue(world.Reply{ToolCalls: calls})
	})
	sc.Step(`^the model has been asked (\d+) times?$`, func(n int) error {
		ctx, cancel := s.wait()
		defer cancel()
		if err := s.world.Model().WaitRequests(ctx, n); err != nil {
			return fail("the model", fmt.Sprintf("%d requests", s.world.Model().Count()), fmt.Sprintf("at least %d", n))
		}
		return nil
	})
	sc.Step(`^the model has been asked (\d+) times? in all$`, func(n int) error {
		if got := s.world.Model().Count(); got != n {
			return fail("the model", fmt.Sprintf("%d requests", got), fmt.Sprintf("exactly %d", n))
		}
		return nil
	})
	sc.Step(`^request (\d+) to the model holds the messages:$`, func(i int, t *godog.Table) error {
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		var want, got []string
		for _, row := range t.Rows[1:] {
			content, err := s.expandMessage(unescape(row.Cells[1].Value))
			if err != nil {
				return err
			}
			if row.Cells[0].Value == "tool" {
				content = canonToolLine(content)
			}
			want = append(want, row.Cells[0].Value+": "+content)
		}
		got = renderMessages(req.Messages)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), "\n"+strings.Join(got, "\n"), "\n"+strings.Join(want, "\n"))
		}
		return nil
	})
	sc.Step(`^request (\d+) to the model holds the same messages as request (\d+)$`, func(i, j int) error {
		a, err := s.modelRequest(j)
		if err != nil {
			return err
		}
		b, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		if describeAll(a.Messages) != describeAll(b.Messages) {
			return fail(fmt.Sprintf("request %d to the model", i), describeAll(b.Messages), "the messages of request "+fmt.Sprint(j)+": "+describeAll(a.Messages))
		}
		return nil
	})
	sc.Step(`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) and waits, then keeps streaming "((?:[^"\\]|\\.)*)" whatever happens$`, func(parts, more string) error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		return s.enqueue(world.Reply{Chunks: quoted(parts), Hold: h, After: []string{unescape(more)}, KeepStreaming: true})
	})
	sc.Step(`^the system hung up on request (\d+) to the model$`, func(i int) error {
		ctx, cancel := s.wait()
		defer cancel()
		if err := s.world.Model().WaitAborted(ctx, i-1); err != nil {
			r, _ := s.modelRequest(i)
			return fail(fmt.Sprintf("request %d to the model", i), fmt.Sprintf("still open or read to its end (finished %v)", r.Finished),
				"the system closing the request when the turn was interrupted")
		}
		return nil
	})
	sc.Step(`^no request to the model holds two consecutive messages of one role$`, func() error {
		for _, req := range s.world.Model().Requests() {
			prev := ""
			for j, m := range req.Messages {
				role := m.Role
				if role == "tool" {
					prev = role
					continue
				}
				if role == prev && role != "system" {
					return fail(fmt.Sprintf("request %d to the model", req.Index+1),
						fmt.Sprintf("two %s messages in a row at %d", role, j), "roles that alternate")
				}
				prev = role
			}
		}
		return nil
	})
}

// describeAll renders every message of a request whole: role, content, tool calls and the call a
// tool message answers.
func describeAll(msgs []world.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n%s: %q", m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " call %s %s(%s)", tc.ID, tc.Name, tc.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " for %s", m.ToolCallID)
		}
	}
	return b.String()
}

// renderMessages renders each message as "role: content" the way expected tables write them: an
// assistant message that calls tools ends with " [calls NAME ARGS, ...]" (or is only that when it
// has no text), and a tool message is its JSON content, canonical, then " [for NAME]", the tool
// whose call it answers.
func renderMessages(msgs []world.Message) []string {
	names := map[string]string{}
	var out []string
	for _, m := range msgs {
		line := m.Content
		switch {
		case len(m.ToolCalls) > 0:
			var calls []string
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				calls = append(calls, tc.Name+" "+canonJSON(tc.Arguments))
			}
			tail := "[calls " + strings.Join(calls, ", ") + "]"
			if line == "" {
				line = tail
			} else {
				line += " " + tail
			}
		case m.Role == "tool":
			name, ok := names[m.ToolCallID]
			if !ok {
				name = "an unknown call " + m.ToolCallID
			}
			line = canonJSON(m.Content) + " [for " + name + "]"
		}
		out = append(out, m.Role+": "+line)
	}
	return out
}

// canonJSON re-encodes a JSON text compactly with sorted keys; anything else is returned as is.
func canonJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}

// canonToolLine canonicalizes the JSON part of an expected tool line "JSON [for NAME]".
func canonToolLine(s string) string {
	if i := strings.LastIndex(s, " [for "); i >= 0 {
		return canonJSON(s[:i]) + s[i:]
	}
	return canonJSON(s)
}

var placeholderRE = regexp.MustCompile(`\{(turn|reply) (\d+)\}|\{summary\}`)

// expandMessage resolves the placeholders of an expected message content: {turn N} is the text of
// turn N's accepted user record and {reply N} the text of its reply, both as the owner reads them
// in the history, and {summary} is the summary the scenario scripted, fenced as spec/prompt.md says.
func (s *scenario) expandMessage(content string) (string, error) {
	if !placeholderRE.MatchString(content) {
		return content, nil
	}
	var es []entry
	if strings.Contains(content, "{turn ") || strings.Contains(content, "{reply ") {
		var err error
		if es, err = s.history(s.ctx, s.owner(), true); err != nil {
			return "", err
		}
	}
	var bad error
	out := placeholderRE.ReplaceAllStringFunc(content, func(m string) string {
		if m == "{summary}" {
			return summaryOpen + s.summary + summaryClose
		}
		sub := placeholderRE.FindStringSubmatch(m)
		n, _ := strconv.ParseInt(sub[2], 10, 64)
		for _, e := range es {
			if e.Turn == n && (sub[1] == "turn" && e.Role == "user" && e.Status == "accepted" || sub[1] == "reply" && e.Role == "assistant") {
				return e.text()
			}
		}
		bad = fail("the history", describeEntries(es), fmt.Sprintf("a %s record of turn %d to compare the model's request with", sub[1], n))
		return m
	})
	return out, bad
}

// modelRequest returns the i-th (1-based) request the model received.
func (s *scenario) modelRequest(i int) (world.ModelRequest, error) {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Model().WaitRequests(ctx, i); err != nil {
		return world.ModelRequest{}, fail("the model", fmt.Sprintf("%d requests", s.world.Model().Count()), fmt.Sprintf("a request number %d", i))
	}
	return s.world.Model().Requests()[i-1], nil
}

func (s *scenario) callID() string {
	s.calls++
	return fmt.Sprintf("call_%d", s.calls)
}
