package dialogue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/budget"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/turn"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// errClosedFlow ends the dialogue loop after the close record.
var errClosedFlow = errors.New("conversation: closed")

// fitValue is the recorded budget verdict of one turn.
type fitValue struct {
	OK             bool               `json:"ok"`
	Keep           int                `json:"keep"`
	Tokens         int                `json:"tokens"`
	Counted        []budget.TurnCount `json:"counted,omitempty"`
	DroppedSummary bool               `json:"droppedSummary,omitempty"`
}

type summaryValue struct {
	OK      bool   `json:"ok"`
	Summary string `json:"summary,omitempty"`
}

// flow is the dialogue: receive, verify, record, run the turn, record, repeat.
func (cv *Dialogue) flow(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	st, err := cv.initialState(c, input)
	if err != nil {
		return nil, err
	}
	if c.Generation() == 0 {
		if err := cv.seed(c, st, input); err != nil {
			return nil, err
		}
	}
	handled := 0
	for {
		var m kernel.Message
		if st.Pending != nil {
			m, st.Pending = *st.Pending, nil
		} else if m, err = c.Receive(); err != nil {
			return nil, err
		}
		// The rotation point: after consuming a message, before starting its turn. The
		// message rides the carry and is handled first by the next generation.
		if handled >= cv.cfg.RotateEveryTurns {
			st.Pending = &m
			return nil, c.ContinueAsNew(st.carry(cv.cfg.MaxCarryBytes))
		}
		handled++
		st.Ord++
		st.remember(m.Key)
		if err := cv.handle(c, st, m); err != nil {
			if errors.Is(err, errClosedFlow) {
				return json.Marshal(map[string]int64{"turns": st.Seq})
			}
			return nil, err
		}
	}
}

func (cv *Dialogue) initialState(c *kernel.Context, input json.RawMessage) (*state, error) {
	if c.Generation() == 0 {
		var in record.StartInput
		if err := json.Unmarshal(input, &in); err != nil || in.V != 1 {
			return nil, fmt.Errorf("conversation: start input: %v", err)
		}
		return &state{V: 1, Owner: in.Owner, Mode: in.Mode, CountEmpty: in.CountEmpty, InvalidPerAsker: in.InvalidPerAsker,
			Replay: envelope.NewReplaySet(cv.cfg.ReplaySetSize)}, nil
	}
	return readStateFrom(input, cv.cfg.MaxCarryBytes, cv.cfg.ReplaySetSize, c.InboxAt)
}

// seed records the exchanges the start input carries, before any message: each a user record
// and its reply under the ids a turn of that ordinal would have, so a replay finds them, and
// each in the window the model is sent with the next turn.
func (cv *Dialogue) seed(c *kernel.Context, st *state, input json.RawMessage) error {
	var in record.StartInput
	if err := json.Unmarshal(input, &in); err != nil {
		return err
	}
	for _, t := range in.Seed {
		st.Ord++
		st.Seq++
		ord, turnNo, asker := st.Ord, st.Seq, t.Asker
		user, err := cv.record(c, st, record.UserID(ord), loomtype.Entry{Turn: turnNo, Role: loomtype.RoleUser,
			Status: loomtype.StatusAccepted, Text: ptr(t.User), MessageID: t.MessageID, Asker: &asker}, nil)
		if err != nil {
			return err
		}
		reply := loomtype.Entry{Turn: turnNo, Role: loomtype.RoleAssistant, Status: t.Status, Asker: &asker}
		if t.Status != loomtype.StatusFailed {
			reply.Text = ptr(t.Reply)
		}
		if _, err := cv.record(c, st, record.ReplyID(ord), reply, nil); err != nil {
			return err
		}
		st.Window = append(st.Window, turnMem{Ord: ord, Turn: turnNo, UserRec: user.Ord, Asker: asker, User: t.User,
			Reply: t.Reply, Status: t.Status})
	}
	st.evict(len(st.Window) - cv.cfg.MaxWindowTurns)
	return nil
}

func (cv *Dialogue) decide(c *kernel.Context, id string, v any, fn func() (any, error)) error {
	return record.Decide(c, id, v, fn)
}

// record writes one transcript record, exactly once. live runs only when the record is new.
func (cv *Dialogue) record(c *kernel.Context, st *state, id string, e loomtype.Entry, live func()) (loomtype.Entry, error) {
	return cv.recordAt(c, st, id, e, nil, live)
}

// recordAt is record; with in set (journal version 4), the record names that inbox entry
// instead of holding the text, message id, asker and edited record e has from it.
func (cv *Dialogue) recordAt(c *kernel.Context, st *state, id string, e loomtype.Entry, in *record.InboxRef, live func()) (loomtype.Entry, error) {
	st.Rec++
	e.Ord = st.Rec
	v, err := record.DecideRecord(c, id, func() (record.Value, error) {
		e.Time = cv.deps.Now().UTC().Truncate(time.Millisecond)
		if live != nil {
			live()
		}
		turns := st.Seq
		rec := record.Of(e)
		if in != nil {
			rec.Text, rec.MessageID, rec.Asker, rec.EditOf, rec.In = nil, "", nil, 0, in
		}
		return record.Value{Rec: rec, Turns: &turns}, nil
	})
	return v.Rec.Entry(), err
}

func (cv *Dialogue) handle(c *kernel.Context, st *state, m kernel.Message) error {
	// The verdict records whether the message was accepted, not the envelope it carried: that is
	// the message's payload, which the inbox keeps (a verdict written before holds a copy, which
	// is used as it is).
	var live *record.EnvelopeJSON
	ord := st.Ord
	vv, err := record.DecideVerdict(c, record.VerifyID(ord), func() (record.Verdict, error) {
		v := envelope.Check(envelope.CheckInput{
			Raw: m.Payload, Keys: cv.cfg.Keys, ConversationID: c.ID(),
			Voices: cv.voices(c, st),
			Now:    m.Time, MaxAgeMs: cv.cfg.MaxEnvelopeAgeMs, Seen: st.Replay,
		})
		turns := st.Seq
		if v.OK {
			e := record.WireEnvelope(v.Envelope)
			live = &e
		}
		return record.Verdict{OK: v.OK, Reason: loomtype.Reason(v.Reason), Turns: &turns}, nil
	})
	if err != nil {
		return err
	}
	if !vv.OK {
		return cv.invalid(c, st, m, vv.Reason, nil)
	}
	env := vv.Envelope
	if env == nil {
		env = live
	}
	if env == nil {
		e, err := envelope.Parse(m.Payload)
		if err != nil {
			return fmt.Errorf("conversation: %s: message %d was accepted and its payload does not parse: %w", c.ID(), m.Seq, err)
		}
		w := record.WireEnvelope(e)
		env = &w
	}
	st.Replay.AddRef(env.ID, env.IAT, m.Seq) // the inbox keeps the envelope at m.Seq
	asker := loomtype.Identity(env.Asker)
	if env.Kind == envelope.KindClose {
		_, err := cv.record(c, st, record.IDClosed, loomtype.Entry{Role: loomtype.RoleSystem, Status: loomtype.StatusClosed,
			MessageID: cv.entryMessageID(st, m), Asker: &asker}, nil)
		if err != nil {
			return err
		}
		return errClosedFlow
	}
	return cv.turn(c, st, m, env, asker)
}

// voices admits the asker of an envelope: the owner in owner mode.
func (cv *Dialogue) voices(c *kernel.Context, st *state) func(envelope.Identity) bool {
	if st.Mode == ModeShared {
		return cv.sharedVoices(c, st)
	}
	return func(id envelope.Identity) bool { return loomtype.Identity(id).Equal(st.Owner) }
}

func (cv *Dialogue) entryMessageID(st *state, m kernel.Message) string {
	if st.Mode == ModeShared {
		return ""
	}
	return m.MessageID
}

// invalid records an invalid message (one that failed verification, or an empty or oversized
// turn), up to MaxInvalidRecords in all, or of each asker in a shared conversation; past that it
// only counts them, with a recorded counter every 100. asker is the verified asker, nil when
// verification failed (the message then counts against its sender).
func (cv *Dialogue) invalid(c *kernel.Context, st *state, m kernel.Message, reason loomtype.Reason, asker *loomtype.Identity) error {
	st.Invalid++
	n := st.Invalid
	if st.Mode == ModeShared && st.InvalidPerAsker {
		who := m.Sender
		if asker != nil {
			who = *asker
		}
		if st.InvalidBy == nil {
			st.InvalidBy = map[string]int64{}
		}
		st.InvalidBy[who.Key()]++ // Key is injective: one count per identity
		n = st.InvalidBy[who.Key()]
	}
	if n > int64(cv.cfg.MaxInvalidRecords) {
		if st.Invalid%100 == 0 {
			var n int64
			return cv.decide(c, record.DroppedID(st.Invalid), &n, func() (any, error) { return st.Invalid, nil })
		}
		return nil
	}
	return cv.reject(c, st, m, reason, asker)
}

// reject records a rejected user message: turn 0, a fixed reason, no text.
func (cv *Dialogue) reject(c *kernel.Context, st *state, m kernel.Message, reason loomtype.Reason, asker *loomtype.Identity) error {
	_, err := cv.record(c, st, record.UserID(st.Ord), loomtype.Entry{Turn: 0, Role: loomtype.RoleUser,
		Status: loomtype.StatusRejected, Reason: reason, MessageID: cv.entryMessageID(st, m), Asker: asker}, nil)
	return err
}

func blank(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) < 0
}

// editMarker is the data line an edit's prompt starts with: the first 500 code points of the
// quoted text as a JSON string (spec/prompt.md), never Go's own quoting, which writes a control
// character as \x01 and a joiner as \u200d.
func editMarker(quote string) string {
	if utf8.RuneCountInString(quote) > 500 {
		r := []rune(quote)
		quote = string(r[:500])
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(quote) // a string always encodes
	return "[This message edits the user's earlier message " + strings.TrimSuffix(b.String(), "\n") + ".]\n"
}

func (cv *Dialogue) turn(c *kernel.Context, st *state, m kernel.Message, env *record.EnvelopeJSON, asker loomtype.Identity) error {
	ord := st.Ord
	if blank(env.Text) || utf8.RuneCountInString(env.Text) > cv.cfg.MaxTurnChars {
		if !st.CountEmpty { // a conversation whose log predates the count replays as written
			return cv.reject(c, st, m, loomtype.ReasonMalformed, &asker)
		}
		return cv.invalid(c, st, m, loomtype.ReasonMalformed, &asker)
	}
	prompt := env.Text
	var editOfTurn int64
	if env.EditOf != nil {
		idx := editedTurn(st, *env.EditOf, asker)
		if idx < 0 {
			return cv.reject(c, st, m, loomtype.ReasonEditInvalid, &asker)
		}
		editOfTurn = st.Window[idx].Turn
		prompt = editMarker(st.Window[idx].User) + env.Text
	}
	// Shared mode: the asker must still be a participant when the turn is dequeued.
	if st.Mode == ModeShared {
		ok, err := cv.stillParticipant(c, st, asker)
		if err != nil {
			return err
		}
		if !ok {
			return cv.reject(c, st, m, loomtype.ReasonNotParticipant, &asker)
		}
	}
	visible, err := cv.visibleWindow(c, st, asker)
	if err != nil {
		return err
	}
	summary := st.Summary
	// The budget verdict is recorded: a replay applies the same eviction whatever the counter
	// says now.
	if b := cv.cfg.Budget; b != nil {
		var fits bool
		if visible, summary, fits, err = cv.fit(c, st, b, ord, prompt, summary, visible); err != nil {
			return err
		} else if !fits {
			return cv.reject(c, st, m, loomtype.ReasonPromptTooLarge, &asker)
		}
	}
	if err := cv.summarize(c, st); err != nil {
		return err
	}
	classes, err := cv.contextClasses(c, st, asker, visible, env)
	if err != nil {
		return err
	}
	st.Seq++
	turnNo := st.Seq
	msgs := composeMessages(cv.cfg.SystemPrompt, summary, visible, prompt)

	var sig *agent.Signal
	if cv.cfg.BargeIn {
		sig = cv.newSignal(c, st, asker)
		defer sig.Disarm()
		defer cv.hub.SetStopper(c.ID(), turnNo, asker.Key(), sig.Fire)()
	}
	replayed := c.Replaying()
	// The user record names the inbox entry (version 4): its text, message id, asker and edited
	// record are the envelope's and the entry's, as AskedOf reads them back.
	ue := loomtype.Entry{Turn: turnNo, Role: loomtype.RoleUser,
		Status: loomtype.StatusAccepted, Text: ptr(env.Text), MessageID: cv.entryMessageID(st, m),
		EditOf: deref(env.EditOf), EditOfTurn: editOfTurn, Asker: &asker, Classes: classes}
	in := record.RefTo(m, st.Mode != ModeShared)
	cv.hub.Note(c.ID(), record.Noted{Ref: *in, Asked: record.Asked{Text: env.Text, MessageID: ue.MessageID, Asker: asker, EditOf: ue.EditOf}})
	user, err := cv.recordAt(c, st, record.UserID(ord), ue, in, func() {
		if sig != nil {
			sig.Arm()
		}
	})
	if err != nil {
		return err
	}
	res, err := cv.runTurn(c, st, turn.Run{Ord: ord, Turn: turnNo, Asker: asker, Msgs: msgs, Sig: sig,
		Replayed: replayed, Env: env})
	if err != nil {
		return err
	}
	return cv.recordReply(c, st, ord, turnNo, asker, user.Ord, env.Text, prompt, classes, res)
}

// editedTurn is the index in st's window of the newest turn of asker whose user record is rec,
// -1 when there is none.
func editedTurn(st *state, rec int64, asker loomtype.Identity) int {
	idx := -1
	for i, t := range st.Window {
		if t.UserRec == rec && t.Asker.Equal(asker) {
			idx = i
		}
	}
	return idx
}

// fit applies budget b to turn ord of prompt: the verdict is recorded, so a replay applies the
// same eviction whatever the counter says now. Given the turns the asker sees (visible) and the
// summary, it returns the turns and the summary the model is sent; fits is false when the prompt
// does not fit (the caller rejects the turn).
func (cv *Dialogue) fit(c *kernel.Context, st *state, b *record.Budget, ord int64, prompt, summary string, visible []turnMem) (_ []turnMem, _ string, fits bool, _ error) {
	var fv fitValue
	err := cv.decide(c, record.FitID(ord), &fv, func() (any, error) {
		in := budget.FitInput{ContextWindow: b.ContextWindow, ReserveOutputTokens: b.ReserveOutputTokens,
			System: cv.cfg.SystemPrompt, Prompt: prompt, Counter: b.Counter, Tools: toolTexts(cv.cfg.Tools)}
		if summary != "" {
			in.Summary, in.SummaryAck = fenceSummary(summary), SummaryAck
		}
		for _, t := range visible {
			in.Turns = append(in.Turns, budget.Turn{Ord: t.Ord, Messages: []string{t.modelUser(), t.modelReply()}, Tokens: t.Tokens})
		}
		r := budget.Fit(in)
		return fitValue{OK: r.OK, Keep: r.Keep, Tokens: r.Tokens, Counted: r.Counted, DroppedSummary: r.DroppedSummary}, nil
	})
	if err != nil {
		return nil, "", false, err
	}
	for _, cnt := range fv.Counted {
		for i := range st.Window {
			if st.Window[i].Ord == cnt.Ord {
				st.Window[i].Tokens = cnt.Tokens
			}
		}
	}
	if !fv.OK {
		return nil, "", false, nil
	}
	keep := fv.Keep
	if fv.DroppedSummary {
		summary = ""
	}
	if st.Mode == ModeOwner {
		// Turns the fit dropped leave the window for good and are folded into the summary.
		st.evict(len(st.Window) - keep)
		visible = st.Window
	} else {
		visible = visible[len(visible)-keep:]
	}
	return visible, summary, true, nil
}

// recordReply records the reply res to turn turnNo (message ord of asker, whose text and prompt
// the user record userRec holds; classes: the turn's context classes) and keeps the turn in the
// window.
func (cv *Dialogue) recordReply(c *kernel.Context, st *state, ord, turnNo int64, asker loomtype.Identity, userRec int64, text, prompt string, classes []string, res turn.Result) error {
	reply := loomtype.Entry{Turn: turnNo, Role: loomtype.RoleAssistant, Status: res.Status, Reason: res.Reason,
		ErrorID: res.ErrorID, Asker: &asker, TurnExecutionID: res.ExecID}
	if res.Status != agent.Failed {
		reply.Text = ptr(res.Text)
	}
	replyClasses := cv.answerClasses(classes, append(res.Tools, res.Memory...))
	reply.Classes = replyClasses
	if _, err := cv.record(c, st, record.ReplyID(ord), reply, nil); err != nil {
		return err
	}
	cv.hub.End(c.ID(), turnNo)
	st.Window = append(st.Window, turnMem{Ord: ord, Turn: turnNo, UserRec: userRec, Asker: asker, User: text,
		Prompt: promptIf(prompt, text), Reply: res.Text, Status: res.Status, Classes: replyClasses})
	st.evict(len(st.Window) - cv.cfg.MaxWindowTurns)
	return nil
}

// runTurn runs the agent loop for one turn: inline in owner mode, as a separate execution owned
// by the asker in shared mode.
func (cv *Dialogue) runTurn(c *kernel.Context, st *state, tr turn.Run) (turn.Result, error) {
	if st.Mode == ModeShared {
		return cv.turns.RunShared(c, tr)
	}
	return cv.turns.RunLoop(c, c.ID(), record.OwnerLoopID(tr.Ord), tr)
}

// newSignal makes the turn's barge-in signal: once armed (by the first live step of the turn)
// it watches the inbox and fires when a message lands that is not a retry of a known one,
// including one that was already waiting when the watch began.
func (cv *Dialogue) newSignal(c *kernel.Context, st *state, asker loomtype.Identity) *agent.Signal {
	known := make(map[string]bool, len(st.Keys))
	for _, k := range st.Keys {
		known[k] = true
	}
	shared := st.Mode == ModeShared
	return agent.NewSignal(func(s *agent.Signal) {
		ch, cancel := c.WatchInbox()
		done := make(chan struct{})
		s.OnDisarm(func() { close(done); cancel() })
		interrupts := func() bool {
			msgs, err := c.Peek(64)
			if err != nil {
				return false
			}
			for _, m := range msgs {
				if known[m.Key] {
					continue
				}
				if shared && !cv.sameAsker(c.ID(), m, asker) {
					continue
				}
				return true
			}
			return false
		}
		// Checkpoints look for themselves too, so a message that has arrived is seen at the next
		// checkpoint whether or not the watcher has woken up for it yet.
		s.SetProbe(interrupts)
		// The first look is synchronous, so a message already waiting when the turn goes live
		// is seen by the checkpoint that armed the watch.
		if interrupts() {
			s.Fire()
			return
		}
		go func() {
			for {
				select {
				case <-ch:
				case <-done:
					return
				case <-c.Ctx().Done():
					return
				}
				if interrupts() {
					s.Fire()
					return
				}
			}
		}()
	})
}

// summarize folds evicted turns into the rolling summary. A summarizer that fails degrades: the
// previous summary stays and the evicted turns leave anyway.
func (cv *Dialogue) summarize(c *kernel.Context, st *state) error {
	if len(st.Evicted) == 0 {
		return nil
	}
	evicted := st.Evicted
	st.Evicted = nil
	if cv.deps.Summarizer == nil {
		return nil
	}
	var msgs []hostio.SummaryMessage
	for _, t := range evicted {
		if st.Mode == ModeShared && len(t.Classes) > 0 {
			continue // a restricted turn is dropped, never summarized
		}
		msgs = append(msgs, hostio.SummaryMessage{Role: model.RoleUser, Content: t.User},
			hostio.SummaryMessage{Role: model.RoleAssistant, Content: t.modelReply()})
	}
	if len(msgs) == 0 {
		return nil
	}
	prev := st.Summary
	var sv summaryValue
	err := cv.decide(c, record.SummarizeDoneID(st.Ord), &sv, func() (any, error) {
		out, err := c.Execute(record.SummarizeID(st.Ord), func(ctx context.Context) (json.RawMessage, error) {
			s, err := cv.deps.Summarizer.Summarize(ctx, prev, msgs)
			if err != nil {
				return nil, err
			}
			return json.Marshal(s)
		})
		if err != nil {
			if errors.Is(err, kernel.ErrStopped) {
				return nil, err
			}
			return summaryValue{OK: false}, nil
		}
		var s string
		_ = json.Unmarshal(out, &s)
		if b := cv.cfg.Budget; b != nil {
			s = budget.TrimSummary(s, b.MaxSummaryTokens, b.Counter)
		}
		return summaryValue{OK: true, Summary: s}, nil
	})
	if err != nil {
		return err
	}
	if sv.OK {
		st.Summary = sv.Summary
	}
	return nil
}

func ptr(s string) *string { return &s }

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func promptIf(prompt, text string) string {
	if prompt == text {
		return ""
	}
	return prompt
}

func toolTexts(tools []model.Tool) []budget.ToolText {
	out := make([]budget.ToolText, 0, len(tools))
	for _, t := range tools {
		var params string
		if t.Parameters != nil {
			b, _ := json.Marshal(t.Parameters)
			params = string(b)
		}
		out = append(out, budget.ToolText{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out
}
