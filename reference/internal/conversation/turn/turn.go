// Package turn runs one turn's agent loop, the part both modes share: the recall from the asker's
// memory, the loop itself and the write-back, inline in the coordinating execution (owner mode) or
// as a separate execution owned by the asker (shared mode, RunShared and Flow). Its live output
// goes to the hub under the execution that runs it.
package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Runner runs turns under one configuration. It holds no kernel: each run reaches the one running
// it through its Context. Safe for concurrent use.
type Runner struct {
	cfg  record.Config
	deps record.Deps
	hub  *live.Hub
}

// New returns the runner of turns under cfg and deps (defaults already applied), publishing live
// output to hub.
//
//	tr := turn.New(cfg, deps, hub)
func New(cfg record.Config, deps record.Deps, hub *live.Hub) *Runner {
	return &Runner{cfg: cfg, deps: deps, hub: hub}
}

// memoryScope is the memory scope of an asker: memory is per asker.
func memoryScope(asker loomtype.Identity) string { return record.IdentityKey(asker) }

// Run is one turn to run: its message ordinal and turn number, its asker, the request, its
// barge-in signal (nil: none), whether the coordinator is replaying, and its envelope.
type Run struct {
	Ord, Turn int64
	Asker     loomtype.Identity
	Msgs      []model.Message
	Sig       *agent.Signal
	Replayed  bool
	Env       *record.EnvelopeJSON
}

// Result is how a turn ended, with the classes its memory recall adds and, in shared mode, the
// turn execution that ran it.
type Result struct {
	agent.Result
	Memory []string
	ExecID string
}

// RunLoop runs one turn's agent loop: recall from the asker's memory (a journaled step), the
// loop itself, and the write-back of a completed turn (a journaled step too).
func (cv *Runner) RunLoop(c *kernel.Context, convID, loopID string, tr Run) (Result, error) {
	msgs := tr.Msgs
	var out Result
	if cv.deps.Memory != nil {
		scope := memoryScope(tr.Asker)
		raw, err := c.Execute(loopID+record.MemoryRecall, func(ctx context.Context) (json.RawMessage, error) {
			entries, err := cv.deps.Memory.Recall(ctx, scope, lastUser(msgs))
			if err != nil {
				entries = nil // a memory that cannot be reached degrades to none
			}
			return json.Marshal(entries)
		})
		if err != nil && !isStepError(err) {
			return out, err
		}
		var entries []hostio.MemoryEntry
		_ = json.Unmarshal(raw, &entries)
		if len(entries) > 0 {
			msgs = withMemory(msgs, entries)
			out.Memory = []string{record.MemoryClassPrefix + scope}
		}
	}
	res, err := agent.Run(c, cv.agentConfig(convID, c.ID(), loopID, tr), msgs)
	if err != nil {
		return out, err
	}
	out.Result = res
	if cv.deps.Memory != nil && res.Status == agent.Complete {
		prompt := lastUser(tr.Msgs)
		// A turn that was fed a tool's error text saw untrusted output: its answer is stored so.
		tainted := false
		for _, call := range res.Calls {
			tainted = tainted || !call.OK
		}
		entries := []hostio.MemoryEntry{
			{ID: memoryID(c.ID(), loopID, prompt), Role: model.RoleUser, Text: prompt},
			{ID: memoryID(c.ID(), loopID, prompt+"\x00"+res.Text), Role: model.RoleAssistant, Text: res.Text, Tainted: tainted},
		}
		scope := memoryScope(tr.Asker)
		if _, err := c.Execute(loopID+record.MemoryWrite, func(ctx context.Context) (json.RawMessage, error) {
			return nil, cv.deps.Memory.Write(ctx, scope, entries)
		}); err != nil && !isStepError(err) {
			return out, err
		}
	}
	return out, nil
}

func isStepError(err error) bool {
	var se *kernel.StepError
	return errors.As(err, &se)
}

func lastUser(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// agentConfig is the agent loop of one turn of conversation convID, run by the execution
// publisher: its live output goes to the hub as publisher's, which the hub takes only from the
// execution that runs the conversation's current turn.
func (cv *Runner) agentConfig(convID, publisher, loopID string, tr Run) agent.Config {
	began := false
	asker := tr.Asker
	return agent.Config{Principal: &asker,
		LoopID: loopID, Provider: cv.deps.Provider, Model: cv.cfg.Model, Tools: cv.cfg.Tools,
		Runner: cv.deps.Tools, MaxIterations: cv.cfg.MaxIterations, Parallel: cv.cfg.ParallelTools, Signal: tr.Sig,
		Allowed:       func(tool string) bool { return cv.allowed(tr.Asker, tool) },
		NotIdempotent: func(tool string) bool { return slices.Contains(cv.cfg.NotIdempotent, tool) },
		OnLive: func() {
			if !began {
				began = true
				cv.hub.Begin(convID, publisher, tr.Turn, tr.Asker.Key(), tr.Replayed)
			}
		},
		OnDelta: func(text string) { cv.hub.Delta(convID, publisher, tr.Turn, text) },
		OnTool: func(ev agent.ToolEvent) {
			cv.hub.Tool(convID, publisher, tr.Turn, live.Tool{Call: ev.Call, Name: ev.Tool, Done: ev.Done, OK: ev.OK, Output: ev.Output, Error: ev.Error})
		},
		OnError: func(errorID string, err error) {
			if cv.deps.OnError != nil {
				cv.deps.OnError(hostio.ErrorReport{ErrorID: errorID, Error: errorDetail(err), ConversationID: convID, Turn: tr.Turn})
			}
		},
		// A failing tool's text is remote data: fenced when fed back, and kept so in the
		// recorded outcome (spec/http.md, Runs: tool failures and authority).
		TaintToolErrors: true,
	}
}

// turnInput is what a shared-mode turn execution is started with. A recovery adopts an existing
// execution at the turn's id only when it was started as this asker with this input.
type turnInput struct {
	V              int               `json:"v"`
	ConversationID string            `json:"conversationId"`
	Ord            int64             `json:"ord"`
	Turn           int64             `json:"turn"`
	Asker          loomtype.Identity `json:"asker"`
	MessageID      string            `json:"messageId"`
	Text           string            `json:"text"`
	Messages       json.RawMessage   `json:"messages"`
	Rerun          bool              `json:"-"`
}

type turnOutput struct {
	Status  loomtype.RecordStatus `json:"status"`
	Text    string                `json:"text,omitempty"`
	Reason  loomtype.Reason       `json:"reason,omitempty"`
	ErrorID string                `json:"errorId,omitempty"`
	Tools   []string              `json:"tools,omitempty"`
	Memory  []string              `json:"memory,omitempty"`
}

var (
	sigMu   sync.Mutex
	signals = map[string]*agent.Signal{}
)

func registerSignal(execID string, s *agent.Signal) func() {
	if s == nil {
		return func() {}
	}
	sigMu.Lock()
	signals[execID] = s
	sigMu.Unlock()
	return func() {
		sigMu.Lock()
		if signals[execID] == s {
			delete(signals, execID)
		}
		sigMu.Unlock()
	}
}

func signalOf(execID string) *agent.Signal {
	sigMu.Lock()
	defer sigMu.Unlock()
	return signals[execID]
}

// RunShared runs a turn as its asker: a separate execution, owned by the asker, under a
// deterministic, unguessable id. After a crash an execution found at that id is adopted only if
// it is ours (the turn flow, started as this asker, for this conversation, ordinal, turn, message
// and text); anything else fails the turn with "turn-failed".
func (cv *Runner) RunShared(c *kernel.Context, tr Run) (Result, error) {
	var execID string
	if err := record.Decide(c, record.TurnExecID(tr.Ord), &execID, func() (any, error) {
		return envelope.TurnExecutionID(cv.cfg.Keys[0], c.ID(), tr.Ord), nil
	}); err != nil {
		return Result{}, err
	}
	msgs, _ := json.Marshal(tr.Msgs)
	in := turnInput{V: 1, ConversationID: c.ID(), Ord: tr.Ord, Turn: tr.Turn, Asker: tr.Asker, MessageID: tr.Env.ID, Text: tr.Env.Text, Messages: msgs}
	raw, err := c.Execute(record.TurnStepID(tr.Ord), func(ctx context.Context) (json.RawMessage, error) {
		defer registerSignal(execID, tr.Sig)()
		return json.Marshal(cv.startAndAwait(ctx, c.Kernel(), c.ID(), execID, in))
	})
	if err != nil {
		if isStepError(err) {
			return Result{Result: agent.Result{Status: agent.Failed, Reason: loomtype.ReasonTurnFailed, ErrorID: loomtype.NewErrorID()}, ExecID: execID}, nil
		}
		return Result{}, err
	}
	var out turnOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return Result{}, fmt.Errorf("conversation: turn output: %w", err)
	}
	return Result{Result: agent.Result{Status: out.Status, Text: out.Text, Reason: out.Reason, ErrorID: out.ErrorID, Tools: out.Tools},
		Memory: out.Memory, ExecID: execID}, nil
}

func (cv *Runner) startAndAwait(ctx context.Context, k *kernel.Kernel, convID, execID string, in turnInput) turnOutput {
	b, _ := json.Marshal(in)
	failed := func(cause error) turnOutput {
		id := loomtype.NewErrorID()
		if cv.deps.OnError != nil {
			cv.deps.OnError(hostio.ErrorReport{ErrorID: id, Error: cause.Error(), ConversationID: convID, Turn: in.Turn})
		}
		return turnOutput{Status: agent.Failed, Reason: loomtype.ReasonTurnFailed, ErrorID: id}
	}
	// The hub takes the turn's live output from this execution alone, and only once it is known
	// to be ours: named before a start that creates it (its first words are not lost), after
	// the verification of one found at the id.
	asker := in.Asker.Key()
	info, err := k.Info(ctx, execID)
	switch {
	case err == nil:
		if cause := cv.verifyTurn(ctx, k, info, in); cause != nil {
			return failed(cause)
		}
		cv.hub.Expect(convID, in.Turn, execID, asker)
	case !errors.Is(err, loomtype.ErrNotFound):
		if ctx.Err() != nil {
			return turnOutput{}
		}
		return failed(err)
	default:
		cv.hub.Expect(convID, in.Turn, execID, asker)
		info, err = k.Start(ctx, kernel.StartRequest{ID: execID, Flow: record.TurnFlowName, Input: b, Principal: in.Asker})
		if errors.Is(err, loomtype.ErrAlreadyStarted) {
			// Started by someone else in between: not ours until verified.
			cv.hub.Withdraw(convID, in.Turn, execID)
			if cause := cv.verifyTurn(ctx, k, info, in); cause != nil {
				return failed(cause)
			}
			cv.hub.Expect(convID, in.Turn, execID, asker)
		} else if err != nil {
			cv.hub.Withdraw(convID, in.Turn, execID)
			if ctx.Err() != nil {
				return turnOutput{}
			}
			return failed(err)
		}
	}
	info, err = k.Await(ctx, execID)
	if err != nil {
		return turnOutput{}
	}
	if info.State != kernel.StateCompleted {
		return failed(fmt.Errorf("turn execution %s ended %s: %s", execID, info.State, info.Error))
	}
	var out turnOutput
	if err := json.Unmarshal(info.Output, &out); err != nil {
		return failed(err)
	}
	return out
}

// verifyTurn checks that an execution found at a turn's id is the turn this coordinator started.
func (cv *Runner) verifyTurn(ctx context.Context, k *kernel.Kernel, info kernel.Info, want turnInput) error {
	if info.Flow != record.TurnFlowName || !info.Principal.Equal(want.Asker) {
		return fmt.Errorf("the execution at the turn's id is not this asker's turn (flow %q, principal %s)", info.Flow, info.Principal)
	}
	raw, err := k.Input(ctx, info.ID)
	if err != nil {
		return err
	}
	var got turnInput
	if err := json.Unmarshal(raw, &got); err != nil {
		return fmt.Errorf("the execution at the turn's id has an unreadable input")
	}
	if got.ConversationID != want.ConversationID || got.Ord != want.Ord || got.Turn != want.Turn ||
		!got.Asker.Equal(want.Asker) || got.MessageID != want.MessageID || got.Text != want.Text {
		return fmt.Errorf("the execution at the turn's id was started for another turn")
	}
	return nil
}

// Flow is the kernel flow of a shared-mode turn (record.record.TurnFlowName): the agent loop run as its asker, with the asker's grants and
// memory.
func (cv *Runner) Flow(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	var in turnInput
	if err := json.Unmarshal(input, &in); err != nil || in.V != 1 {
		return nil, fmt.Errorf("conversation: turn input: %v", err)
	}
	if !c.Principal().Equal(in.Asker) {
		return nil, fmt.Errorf("conversation: a turn must run as its asker")
	}
	tr := Run{Ord: in.Ord, Turn: in.Turn, Asker: in.Asker, Replayed: c.Replaying(), Sig: signalOf(c.ID())}
	if err := json.Unmarshal(in.Messages, &tr.Msgs); err != nil {
		return nil, fmt.Errorf("conversation: turn messages: %w", err)
	}
	res, err := cv.RunLoop(c, in.ConversationID, record.SharedLoopID(in.Ord), tr)
	if err != nil {
		return nil, err
	}
	return json.Marshal(turnOutput{Status: res.Status, Text: res.Text, Reason: res.Reason, ErrorID: res.ErrorID, Tools: res.Tools, Memory: res.Memory})
}

// allowed reports whether asker may call tool: the host's grants, then the embedding program's.
func (cv *Runner) allowed(asker loomtype.Identity, tool string) bool {
	if g, ok := cv.cfg.Shared.Grants[record.IdentityKey(asker)]; ok {
		return slices.Contains(g, tool)
	}
	return cv.deps.Allowed == nil || cv.deps.Allowed(asker, tool)
}

func memoryID(execID, loopID, text string) string {
	h := sha256.Sum256([]byte(execID + "\x00" + loopID + "\x00" + text))
	return hex.EncodeToString(h[:12])
}

// Fences of recalled memory (spec/prompt.md).
const (
	MemoryOpen  = "<recalled-memory>\n"
	MemoryClose = "</recalled-memory>\n"
)

// withMemory puts recalled entries, fenced as data, at the head of the prompt's user message.
func withMemory(msgs []model.Message, entries []hostio.MemoryEntry) []model.Message {
	out := append([]model.Message(nil), msgs...)
	var b strings.Builder
	b.WriteString(MemoryOpen)
	for _, e := range entries {
		b.WriteString("- ")
		b.WriteString(strings.ReplaceAll(e.Text, "\n", " "))
		b.WriteString("\n")
	}
	b.WriteString(MemoryClose)
	last := len(out) - 1
	out[last].Content = b.String() + out[last].Content
	return out
}

// errorDetail is the whole story of an error for the host's error hook: a provider's own answer
// included (it may name hosts or hold credentials, which is why only the hook sees it).
func errorDetail(err error) string {
	var pe *model.ProviderError
	if errors.As(err, &pe) && pe.Body != "" {
		return err.Error() + ": " + pe.Body
	}
	return err.Error()
}
