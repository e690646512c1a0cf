package conversation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/reference/agent"
	"github.com/loomcheck/loomcheck/reference/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/envelope"
	"github.com/loomcheck/loomcheck/reference/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Defaults of shared mode.
const (
	DefaultMaxParticipants   = 100
	DefaultMaxQueuedPerAsker = 8
	// Unclassified is the class of a tool the host declared no class for.
	Unclassified = "unclassified"
)

// Shared configures shared mode: a conversation with explicit participants, each turn run as its
// asker, every answer classified and every entry filtered per viewer.
type Shared struct {
	// Service is the host principal the coordinating execution runs as. No end-user identity
	// may equal it. Without it, shared conversations cannot start.
	Service           *loomtype.Identity
	MaxParticipants   int
	MaxQueuedPerAsker int
	// Grants lists, per asker (IdentityKey), the tools their turns may call; an asker not listed
	// may call every tool.
	Grants map[string][]string
	// Narrowed lists the delegated identities (IdentityKey) the host maps to a narrowed
	// principal; other delegated askers are refused.
	Narrowed []string
}

func (s Shared) validate() error {
	if s.Service != nil && !s.Service.Valid() {
		return fmt.Errorf("%w: the service principal needs an actor", loomtype.ErrConfig)
	}
	return nil
}

// ErrDelegation refuses a delegated asker the host does not map to a narrowed principal.
var ErrDelegation = errors.New("conversation: a delegated asker is refused in a shared conversation")

// IdentityKey renders an identity as "tenant/actor" or "tenant/actor~onBehalfOf".
func IdentityKey(id loomtype.Identity) string { return id.String() }

// memoryScope is the memory scope of an asker: memory is per asker.
func memoryScope(asker loomtype.Identity) string { return IdentityKey(asker) }

// ParticipantChange is one recorded change of a shared conversation's participants.
type ParticipantChange = participants.Change

type participantChange = ParticipantChange

// participants reads the current participant set of a shared conversation (owner first). It is
// read on every request, so a change takes effect on the next one; the book's cache, keyed by the
// stream's head, avoids re-reading an unchanged stream.
func (cv *Conversations) participants(ctx context.Context, k *kernel.Kernel, id string) ([]loomtype.Identity, error) {
	c, err := cv.book.Read(ctx, k, id)
	return c.Members, err
}

func (cv *Conversations) isService(id loomtype.Identity) bool {
	return cv.cfg.Shared.Service != nil && cv.cfg.Shared.Service.Equal(id)
}

func (cv *Conversations) maxParticipants() int {
	if cv.cfg.Shared.MaxParticipants > 0 {
		return cv.cfg.Shared.MaxParticipants
	}
	return DefaultMaxParticipants
}

func (cv *Conversations) sharedStartCheck(owner loomtype.Identity, participants []loomtype.Identity) (loomtype.Identity, error) {
	if cv.cfg.Shared.Service == nil {
		return loomtype.Identity{}, loomtype.BadRequest("mode", "shared mode is not configured")
	}
	if cv.isService(owner) {
		return loomtype.Identity{}, loomtype.BadRequest("owner", "the service identity cannot own a conversation")
	}
	set := []loomtype.Identity{owner}
	for _, p := range participants {
		if !p.Valid() || cv.isService(p) {
			return loomtype.Identity{}, loomtype.BadRequest("participants", "")
		}
		if !slices.Contains(set, p) {
			set = append(set, p)
		}
	}
	if len(set) > cv.maxParticipants() {
		return loomtype.Identity{}, loomtype.BadRequest("participants", fmt.Sprintf("more than %d participants", cv.maxParticipants()))
	}
	return *cv.cfg.Shared.Service, nil
}

func (cv *Conversations) initParticipants(ctx context.Context, id string, owner loomtype.Identity, ps []loomtype.Identity) error {
	return cv.book.Init(ctx, cv.kernel(), id, owner, ps)
}

// finishParticipants records the initial participants of a shared conversation whose start
// recorded none (it stopped in between); a set already recorded, by the start or a concurrent
// retry, is kept.
func (cv *Conversations) finishParticipants(ctx context.Context, id string, owner loomtype.Identity, ps []loomtype.Identity) error {
	return cv.book.Finish(ctx, cv.kernel(), id, owner, ps)
}

// authorizeParticipant admits the participants of a shared conversation; the service identity is
// never a viewer.
func (cv *Conversations) authorizeParticipant(ctx context.Context, m meta, principal loomtype.Identity, id string) error {
	if cv.isService(principal) {
		return loomtype.ErrNotFound
	}
	set, err := cv.participants(ctx, cv.kernel(), id)
	if err != nil {
		return err
	}
	if !slices.Contains(set, principal) {
		return loomtype.ErrNotFound
	}
	return nil
}

// ParticipantList is what the participants routes answer.
type ParticipantList struct {
	Owner        loomtype.Identity   `json:"owner"`
	Participants []loomtype.Identity `json:"participants"`
	// Changes are the recorded changes, oldest first, each with who made it (at most 1000).
	Changes []ParticipantChange `json:"changes,omitempty"`
}

// Participants lists a conversation's participants (in owner mode, the owner alone).
//
// Errors: loomtype.ErrNotFound.
func (cv *Conversations) Participants(ctx context.Context, principal loomtype.Identity, id string) (ParticipantList, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return ParticipantList{}, err
	}
	if m.mode != ModeShared {
		return ParticipantList{Owner: m.owner, Participants: []loomtype.Identity{m.owner}}, nil
	}
	ps, err := cv.book.Read(ctx, cv.kernel(), id)
	if err != nil {
		return ParticipantList{}, err
	}
	return ParticipantList{Owner: m.owner, Participants: append([]loomtype.Identity{}, ps.Members...),
		Changes: append([]ParticipantChange{}, ps.Changes...)}, nil
}

// ChangeParticipants adds or removes a participant of a shared conversation. Only the owner
// manages participants; the owner cannot be removed; there are at most MaxParticipants. Each
// change is recorded, with who made it, in the conversation's participant stream (never its log),
// and takes effect on the next request.
//
// Errors: loomtype.ErrNotFound (not yours to manage), loomtype.ErrBadRequest (a bad identity,
// the service identity, too many), loomtype.ErrConflict (removing the owner).
func (cv *Conversations) ChangeParticipants(ctx context.Context, principal loomtype.Identity, id, op string, who loomtype.Identity) (ParticipantList, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return ParticipantList{}, err
	}
	if m.mode != ModeShared {
		return ParticipantList{}, loomtype.BadRequest("mode", "an owner-only conversation has no participants to manage")
	}
	if !m.owner.Equal(principal) {
		return ParticipantList{}, loomtype.ErrNotFound
	}
	if !who.Valid() || cv.isService(who) {
		return ParticipantList{}, loomtype.BadRequest("identity", "")
	}
	set, err := cv.participants(ctx, cv.kernel(), id)
	if err != nil {
		return ParticipantList{}, err
	}
	switch participants.Op(op) {
	case participants.OpAdd:
		if slices.Contains(set, who) {
			return cv.Participants(ctx, principal, id)
		}
		if len(set) >= cv.maxParticipants() {
			return ParticipantList{}, loomtype.BadRequest("participants", fmt.Sprintf("more than %d participants", cv.maxParticipants()))
		}
	case participants.OpRemove:
		if who.Equal(m.owner) {
			return ParticipantList{}, fmt.Errorf("%w: the owner cannot be removed", loomtype.ErrConflict)
		}
		if !slices.Contains(set, who) {
			return cv.Participants(ctx, principal, id)
		}
	default:
		return ParticipantList{}, loomtype.BadRequest("op", "")
	}
	if err := cv.book.Record(ctx, cv.kernel(), id, participantChange{Op: participants.Op(op), Identity: who, By: principal}); err != nil {
		return ParticipantList{}, err
	}
	return cv.Participants(ctx, principal, id)
}

// checkSharedSend applies shared mode's admission rules to a send: delegation and the queue cap.
func (cv *Conversations) checkSharedSend(ctx context.Context, id string, asker loomtype.Identity) error {
	if asker.OnBehalfOf != "" && !slices.Contains(cv.cfg.Shared.Narrowed, IdentityKey(asker)) {
		return ErrDelegation
	}
	max := cv.cfg.Shared.MaxQueuedPerAsker
	if max <= 0 {
		max = DefaultMaxQueuedPerAsker
	}
	backlog, err := cv.kernel().Backlog(ctx, id, 1024)
	if err != nil {
		return err
	}
	n := 0
	for _, m := range backlog {
		if a, ok := cv.signedAskerOf(id, m.Payload); ok && a.Equal(asker) {
			n++
		}
	}
	if n >= max {
		return &loomtype.LimitError{Limit: "queued turns per asker", Max: int64(max)}
	}
	return nil
}

// signedAskerOf returns the asker of a payload that is an envelope for conversation id signed
// under one of the keys: only those count against an asker's queue, so a payload nobody signed
// cannot use up someone else's share.
func (cv *Conversations) signedAskerOf(id string, payload json.RawMessage) (loomtype.Identity, bool) {
	e, err := envelope.Parse(payload)
	if err != nil || e.ConversationID != id || envelope.Verify(cv.cfg.Keys, e) != nil {
		return loomtype.Identity{}, false
	}
	return loomtype.Identity(e.Asker), true
}

// sharedVoices admits any identity but the service's: the host signed the envelope; whether the
// asker is still a participant is a recorded verdict of its own (not-a-participant).
func (cv *Conversations) sharedVoices(c *kernel.Context, st *state) func(envelope.Identity) bool {
	return func(id envelope.Identity) bool { return !cv.isService(loomtype.Identity(id)) && id.Actor != "" }
}

// stillParticipant records whether the asker is a participant when the turn is dequeued.
func (cv *Conversations) stillParticipant(c *kernel.Context, st *state, asker loomtype.Identity) (bool, error) {
	var ok bool
	err := cv.decide(c, memberID(st.Ord), &ok, func() (any, error) {
		set, err := cv.participants(c.Ctx(), c.Kernel(), c.ID())
		if err != nil {
			return nil, err
		}
		return slices.Contains(set, asker), nil
	})
	return ok, err
}

// visibleWindow is the part of the window the asker's turn may see: in shared mode a recorded
// verdict that keeps a turn only when its answer is unrestricted, the asker's own, or one the
// asker is cleared for; a restricted turn is excluded whole.
func (cv *Conversations) visibleWindow(c *kernel.Context, st *state, asker loomtype.Identity) ([]turnMem, error) {
	if st.Mode != ModeShared {
		return st.Window, nil
	}
	var ords []int64
	err := cv.decide(c, visibleID(st.Ord), &ords, func() (any, error) {
		cache := map[string]bool{}
		out := []int64{}
		for _, t := range st.Window {
			if len(t.Classes) == 0 || t.Asker.Equal(asker) || cv.clearedCached(c.Ctx(), asker, t.Classes, cache) {
				out = append(out, t.Ord)
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	var out []turnMem
	for _, t := range st.Window {
		if slices.Contains(ords, t.Ord) {
			out = append(out, t)
		}
	}
	return out, nil
}

// contextClasses are the classes of what fed the turn's context: every visible turn's classes and,
// for an edit, the edited turn's. The question is stamped with them.
func (cv *Conversations) contextClasses(c *kernel.Context, st *state, asker loomtype.Identity, window []turnMem, env *envelopeJSON) ([]string, error) {
	if st.Mode != ModeShared {
		return nil, nil
	}
	var cls []string
	for _, t := range window {
		cls = append(cls, t.Classes...)
	}
	if env.EditOf != nil {
		for _, t := range st.Window {
			if t.UserRec == *env.EditOf {
				cls = append(cls, t.Classes...)
			}
		}
	}
	return classSet(cls), nil
}

// answerClasses are the classes of an answer: its context's, the declared class of every tool it
// called (unclassified for a tool without one) and its memory class, if it drew on memory.
func (cv *Conversations) answerClasses(context []string, tools []string) []string {
	cls := append([]string{}, context...)
	for _, t := range tools {
		if strings.HasPrefix(t, memoryClassPrefix) {
			cls = append(cls, t)
			continue
		}
		if c := cv.cfg.ToolClasses[t]; c != "" {
			cls = append(cls, c)
		} else {
			cls = append(cls, Unclassified)
		}
	}
	return classSet(cls)
}

const memoryClassPrefix = "memory:"

func classSet(cls []string) []string {
	if len(cls) == 0 {
		return nil
	}
	sort.Strings(cls)
	return slices.Compact(cls)
}

// cleared asks the host whether viewer may see every class; only an exact true clears.
func (cv *Conversations) clearedCached(ctx context.Context, viewer loomtype.Identity, classes []string, cache map[string]bool) bool {
	key := strings.Join(classes, "\x00")
	if v, ok := cache[key]; ok {
		return v
	}
	v := cv.deps.Cleared != nil && cv.deps.Cleared(ctx, viewer, classes)
	cache[key] = v
	return v
}

// sameAsker reports whether an inbox message is an envelope for conversation id signed for asker
// (a participant's follow-up interrupts only their own running turn; a payload nobody signed
// interrupts nobody's).
func (cv *Conversations) sameAsker(id string, m kernel.Message, asker loomtype.Identity) bool {
	a, ok := cv.signedAskerOf(id, m.Payload)
	return ok && a.Equal(asker)
}

// filter applies per-viewer filtering to entries: an entry the viewer is not cleared for becomes
// a bare placeholder; the asker always sees their own entries; a turn execution id is shown to its
// asker only.
func (cv *Conversations) filter(ctx context.Context, viewer loomtype.Identity, entries []loomtype.Entry) []loomtype.Entry {
	cache := map[string]bool{}
	out := make([]loomtype.Entry, len(entries))
	for i, e := range entries {
		own := e.Asker != nil && e.Asker.Equal(viewer)
		switch {
		case own:
		case len(e.Classes) == 0 || cv.clearedCached(ctx, viewer, e.Classes, cache):
			e.TurnExecutionID = ""
		default:
			e = loomtype.Entry{Cursor: e.Cursor, Ord: e.Ord, Turn: e.Turn, Role: e.Role, Status: loomtype.StatusRestricted,
				Time: e.Time, Asker: e.Asker}
		}
		out[i] = e
	}
	return out
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

// runSharedTurn runs a turn as its asker: a separate execution, owned by the asker, under a
// deterministic, unguessable id. After a crash an execution found at that id is adopted only if
// it is ours (the turn flow, started as this asker, for this conversation, ordinal, turn, message
// and text); anything else fails the turn with "turn-failed".
func (cv *Conversations) runSharedTurn(c *kernel.Context, st *state, tr turnRun) (turnResult, error) {
	var execID string
	if err := cv.decide(c, turnExecID(tr.ord), &execID, func() (any, error) {
		return envelope.TurnExecutionID(cv.cfg.Keys[0], c.ID(), tr.ord), nil
	}); err != nil {
		return turnResult{}, err
	}
	msgs, _ := json.Marshal(tr.msgs)
	in := turnInput{V: 1, ConversationID: c.ID(), Ord: tr.ord, Turn: tr.turn, Asker: tr.asker, MessageID: tr.env.ID, Text: tr.env.Text, Messages: msgs}
	raw, err := c.Execute(turnStepID(tr.ord), func(ctx context.Context) (json.RawMessage, error) {
		defer registerSignal(execID, tr.sig)()
		return json.Marshal(cv.startAndAwait(ctx, c.Kernel(), c.ID(), execID, in))
	})
	if err != nil {
		if isStepError(err) {
			return turnResult{Result: agent.Result{Status: agent.Failed, Reason: loomtype.ReasonTurnFailed, ErrorID: loomtype.NewErrorID()}, ExecID: execID}, nil
		}
		return turnResult{}, err
	}
	var out turnOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return turnResult{}, fmt.Errorf("conversation: turn output: %w", err)
	}
	return turnResult{Result: agent.Result{Status: out.Status, Text: out.Text, Reason: out.Reason, ErrorID: out.ErrorID, Tools: out.Tools},
		Memory: out.Memory, ExecID: execID}, nil
}

func (cv *Conversations) startAndAwait(ctx context.Context, k *kernel.Kernel, convID, execID string, in turnInput) turnOutput {
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
	asker := in.Asker.String()
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
		info, err = k.Start(ctx, kernel.StartRequest{ID: execID, Flow: TurnFlowName, Input: b, Principal: in.Asker})
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
func (cv *Conversations) verifyTurn(ctx context.Context, k *kernel.Kernel, info kernel.Info, want turnInput) error {
	if info.Flow != TurnFlowName || !info.Principal.Equal(want.Asker) {
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

// turnFlow is a shared-mode turn: the agent loop run as its asker, with the asker's grants and
// memory.
func (cv *Conversations) turnFlow(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	var in turnInput
	if err := json.Unmarshal(input, &in); err != nil || in.V != 1 {
		return nil, fmt.Errorf("conversation: turn input: %v", err)
	}
	if !c.Principal().Equal(in.Asker) {
		return nil, fmt.Errorf("conversation: a turn must run as its asker")
	}
	tr := turnRun{ord: in.Ord, turn: in.Turn, asker: in.Asker, replayed: c.Replaying(), sig: signalOf(c.ID())}
	if err := json.Unmarshal(in.Messages, &tr.msgs); err != nil {
		return nil, fmt.Errorf("conversation: turn messages: %w", err)
	}
	res, err := cv.runLoop(c, in.ConversationID, sharedLoopID(in.Ord), tr)
	if err != nil {
		return nil, err
	}
	return json.Marshal(turnOutput{Status: res.Status, Text: res.Text, Reason: res.Reason, ErrorID: res.ErrorID, Tools: res.Tools, Memory: res.Memory})
}

// allowed reports whether asker may call tool: the host's grants, then the embedding program's.
func (cv *Conversations) allowed(asker loomtype.Identity, tool string) bool {
	if g, ok := cv.cfg.Shared.Grants[IdentityKey(asker)]; ok {
		return slices.Contains(g, tool)
	}
	return cv.deps.Allowed == nil || cv.deps.Allowed(asker, tool)
}

func memoryID(execID, loopID, text string) string {
	h := sha256.Sum256([]byte(execID + "\x00" + loopID + "\x00" + text))
	return hex.EncodeToString(h[:12])
}
