package explore

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// dialogue is one canonical dialogue: a configuration, a world script and the steps its clients
// take. Every step may be run again after a crash: a POST carries a fixed message id, a wait
// starts over. The world is scripted so that an answer does not depend on how often it was
// asked (default replies, holds shared by every copy of a reply).
type dialogue struct {
	name  string
	about string
	// configure adjusts the configuration before the first start.
	configure    func(*sutconfig.SUTConfig)
	noSummarizer bool
	// prepare scripts the world before the first start.
	prepare func(s *session) error
	steps   []step
	// viewers are the principals whose views of the history are compared, the owner first.
	viewers []string
	// logAs reads the execution log (Options.CompareLog) when the owner does not own the
	// execution (shared mode: the service principal does).
	logAs string
	// exercised checks, on the uncrashed run, that the dialogue did what it is about; a dialogue
	// that does not is a fault of the kit (the scenario would prove nothing).
	exercised func(s *session, o *outcome) error
}

type step struct {
	name string
	run  func(ctx context.Context, s *session) error
}

func startStep(owner string, body map[string]any) step {
	return step{"start the conversation", func(ctx context.Context, s *session) error {
		b := map[string]any{}
		for k, v := range body {
			b[k] = v
		}
		return s.start(ctx, owner, b)
	}}
}

func sendStep(who, messageID, text string) step {
	return step{fmt.Sprintf("%s sends %s %q", who, messageID, clip(text, 40)), func(ctx context.Context, s *session) error {
		return s.send(ctx, who, messageID, text)
	}}
}

func steerStep(who, messageID, text string) step {
	return step{fmt.Sprintf("%s steers %s %q", who, messageID, clip(text, 40)), func(ctx context.Context, s *session) error {
		return s.steer(ctx, who, messageID, text)
	}}
}

func putStep(who, messageID, text string) step {
	return step{fmt.Sprintf("%s puts %s %q through the runtime door", who, messageID, clip(text, 40)), func(ctx context.Context, s *session) error {
		return s.put(ctx, who, messageID, text)
	}}
}

func replyStep(viewer string, turn int64) step {
	return step{fmt.Sprintf("%s waits for the reply to turn %d", viewer, turn), func(ctx context.Context, s *session) error {
		return s.waitReply(ctx, viewer, turn)
	}}
}

func askedStep(text string) step {
	return step{fmt.Sprintf("the model is asked about %q", text), func(ctx context.Context, s *session) error {
		return s.waitAsked(ctx, text)
	}}
}

func releaseStep(hold string) step {
	return step{"release the hold " + hold, func(ctx context.Context, s *session) error {
		s.holds[hold].Release()
		return nil
	}}
}

// holdFor scripts every request whose last user message holds match to wait at one shared hold
// (copies enough for every re-ask a crash can cause), then answer after.
func holdFor(s *session, name, match string, after []string) error {
	h := s.w.NewHold()
	s.holds[name] = h
	replies := make([]world.Reply, 6)
	for i := range replies {
		replies[i] = world.Reply{Hold: h, After: after}
	}
	return s.w.Model().EnqueueFor(match, replies...)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func on(v bool) *bool { return &v }

// standardTools are declared to the summary-fold dialogue, whose budget arithmetic counts them.
func standardTools(c *sutconfig.SUTConfig) {
	for _, name := range []string{"lookup", "slow", "transfer", "north", "south"} {
		c.Tools.Definitions = append(c.Tools.Definitions, sutconfig.ToolDef{Name: name, Description: "the " + name + " tool",
			Parameters: map[string]any{"type": "object"}})
	}
}

func longText(i int) string {
	s := fmt.Sprintf("turn %d is about pump %d ", i, i)
	return s + strings.Repeat("x", 400-len(s))
}

func countStatus(h []entry, role, status string) int {
	n := 0
	for _, e := range h {
		if e.str("role") == role && e.str("status") == status {
			n++
		}
	}
	return n
}

// dialogues are the canonical dialogues, in the order they are explored.
func dialogues() []*dialogue {
	return []*dialogue{
		{
			name:  "plain",
			about: "three plain turns, each answered",
			configure: func(c *sutconfig.SUTConfig) {
				c.Conversation.BargeIn = on(false)
			},
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", "how are the pumps?"), replyStep("alice", 1),
				sendStep("alice", "m-2", "and the valves?"), replyStep("alice", 2),
				sendStep("alice", "m-3", "thanks, that is all"), replyStep("alice", 3),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if n := countStatus(o.hist["alice"], "assistant", "complete"); n != 3 {
					return fmt.Errorf("%d complete replies, want 3", n)
				}
				return nil
			},
		},
		{
			name:  "barge-in",
			about: "a message that lands while the model is thinking interrupts the turn",
			configure: func(c *sutconfig.SUTConfig) {
				c.Conversation.BargeIn = on(true)
			},
			prepare: func(s *session) error { return holdFor(s, "think", "check the pumps", nil) },
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", "check the pumps"),
				askedStep("check the pumps"),
				sendStep("alice", "m-2", "actually, check the valves"),
				replyStep("alice", 2),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if n := countStatus(o.hist["alice"], "assistant", "interrupted"); n != 1 {
					return fmt.Errorf("%d interrupted replies, want 1", n)
				}
				return nil
			},
		},
		{
			name:  "rotation",
			about: "rotation every turn with a message pending across it, and a retry from an earlier generation",
			configure: func(c *sutconfig.SUTConfig) {
				c.Conversation.BargeIn = on(false)
				c.Conversation.RotateEveryTurns = 1
			},
			prepare: func(s *session) error { return holdFor(s, "first", "first", []string{"done with the first"}) },
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", "first"),
				askedStep("first"),
				sendStep("alice", "m-2", "second"),
				releaseStep("first"),
				replyStep("alice", 1), replyStep("alice", 2),
				sendStep("alice", "m-1", "first"),
				sendStep("alice", "m-3", "third"), replyStep("alice", 3),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if g := o.status.num("generation"); g < 2 {
					return fmt.Errorf("generation %d after three turns, want a rotation", g)
				}
				if n := countStatus(o.hist["alice"], "assistant", "complete"); n != 3 {
					return fmt.Errorf("%d complete replies, want 3", n)
				}
				return nil
			},
		},
		{
			name:  "tool-call",
			about: "a turn that calls a tool, then answers with its result",
			configure: func(c *sutconfig.SUTConfig) {
				standardTools(c)
			},
			prepare: func(s *session) error {
				if err := s.w.Tools().Define("lookup", world.Behavior{Result: map[string]any{"pressure": "low"}}); err != nil {
					return err
				}
				// One scripted answer: the front refuses a crashed instance's model requests, so
				// only an instance that lives to record the answer consumes it.
				return s.w.Model().EnqueueFor("look up the pumps", world.Reply{ToolCalls: []world.ToolCall{{Name: "lookup", Arguments: `{"q":"pumps"}`}}})
			},
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", "look up the pumps"), replyStep("alice", 1),
				sendStep("alice", "m-2", "thanks"), replyStep("alice", 2),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if n := len(s.w.Tools().CallsOf("lookup")); n != 1 {
					return fmt.Errorf("the tool was called %d times, want 1", n)
				}
				if n := countStatus(o.hist["alice"], "assistant", "complete"); n != 2 {
					return fmt.Errorf("%d complete replies, want 2", n)
				}
				return nil
			},
		},
		{
			name:  "summary-fold",
			about: "turns evicted by the token budget are folded into a rolling summary",
			configure: func(c *sutconfig.SUTConfig) {
				standardTools(c)
				c.Conversation.Budget = &sutconfig.BudgetConfig{ContextWindow: 400, PerMessage: 4}
			},
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", longText(1)), replyStep("alice", 1),
				sendStep("alice", "m-2", longText(2)), replyStep("alice", 2),
				sendStep("alice", "m-3", longText(3)), replyStep("alice", 3),
				sendStep("alice", "m-4", "what did I say?"), replyStep("alice", 4),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if len(s.w.Summarizer().Requests()) == 0 {
					return fmt.Errorf("the summarizer was never asked")
				}
				return nil
			},
		},
		{
			name:  "steer",
			about: "a message steered to the session while a turn runs waits, and is picked up and answered when the turn ends",
			configure: func(c *sutconfig.SUTConfig) {
				c.Conversation.BargeIn = on(false)
			},
			prepare: func(s *session) error { return holdFor(s, "first", "first", []string{"done with the first"}) },
			steps: []step{
				startStep("alice", nil),
				sendStep("alice", "m-1", "first"),
				askedStep("first"),
				steerStep("alice", "m-2", "second"),
				releaseStep("first"),
				replyStep("alice", 1), replyStep("alice", 2),
			},
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if n := countStatus(o.hist["alice"], "assistant", "complete"); n != 2 {
					return fmt.Errorf("%d complete replies, want 2", n)
				}
				for _, e := range o.hist["alice"] {
					if e.str("role") == "user" && e.num("turn") == 2 && e.str("messageId") == "m-2" {
						return nil
					}
				}
				return fmt.Errorf("turn 2 is not the steered message m-2")
			},
		},
		{
			name:  "shared",
			about: "a shared conversation: turns asked by a participant and by the owner, each run as its asker",
			steps: []step{
				startStep("alice", map[string]any{"mode": "shared", "participants": []map[string]string{{"tenant": "acme", "actor": "bob"}}}),
				sendStep("bob", "b-1", "what do the pump logs say?"), replyStep("bob", 1),
				sendStep("alice", "a-1", "who was on call?"), replyStep("alice", 2),
				sendStep("bob", "b-2", "thanks"), replyStep("bob", 3),
			},
			viewers: []string{"alice", "bob"},
			logAs:   "service",
			exercised: func(s *session, o *outcome) error {
				if m := o.status.str("mode"); m != "shared" {
					return fmt.Errorf("mode %q, want shared", m)
				}
				if n := countStatus(o.hist["alice"], "assistant", "complete"); n != 3 {
					return fmt.Errorf("%d complete replies, want 3", n)
				}
				return nil
			},
		},
		{
			name:  "envelope-flood",
			about: "signed envelopes through the runtime door: one obeyed, ten empty ones flooding a replay set of 8",
			configure: func(c *sutconfig.SUTConfig) {
				c.Conversation.ReplaySetSize = 8
			},
			steps: func() []step {
				st := []step{
					startStep("alice", nil),
					sendStep("alice", "m-1", "transfer the funds"), replyStep("alice", 1),
					putStep("alice", "door-1", "hello from the door"), replyStep("alice", 2),
				}
				for i := 1; i <= 10; i++ {
					st = append(st, putStep("alice", fmt.Sprintf("flood-%02d", i), ""))
				}
				return append(st, sendStep("alice", "m-2", "are you still there?"), replyStep("alice", 3))
			}(),
			viewers: []string{"alice"},
			exercised: func(s *session, o *outcome) error {
				if n := countStatus(o.hist["alice"], "user", "rejected"); n != 10 {
					return fmt.Errorf("%d rejected records, want 10", n)
				}
				return nil
			},
		},
	}
}

// DialogueNames lists the canonical dialogues, in the order they are explored.
//
//	fmt.Println(explore.DialogueNames()) // [plain barge-in rotation tool-call summary-fold steer shared envelope-flood]
func DialogueNames() []string {
	var out []string
	for _, d := range dialogues() {
		out = append(out, d.name)
	}
	return out
}
