package dialogue

import (
	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/turn"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// recordUser records ue, the user record of accepted message m, naming the inbox entry (version
// 4): its text, message id, asker and edited record are the envelope's and the entry's, as
// AskedOf reads them back. The first live write arms sig.
func (cv *Dialogue) recordUser(c *kernel.Context, st *state, m kernel.Message, ue loomtype.Entry, sig *agent.Signal) (loomtype.Entry, error) {
	in := record.RefTo(m, st.Mode != ModeShared)
	cv.hub.Note(c.ID(), record.Noted{Ref: *in, Asked: record.Asked{Text: *ue.Text, MessageID: ue.MessageID, Asker: *ue.Asker, EditOf: ue.EditOf}})
	return cv.recordAt(c, st, record.UserID(st.Ord), ue, record.Refs{In: in}, func() {
		if sig != nil {
			sig.Arm()
		}
	})
}

// recordReply records the reply res to turn t (of the message at inbox position in; t holds the
// user's text and prompt, the user record and the turn's context classes) and keeps the turn in
// the window.
func (cv *Dialogue) recordReply(c *kernel.Context, st *state, in int64, t turnMem, res turn.Result) error {
	asker := t.Asker
	reply := loomtype.Entry{Turn: t.Turn, Role: loomtype.RoleAssistant, Status: res.Status, Reason: res.Reason,
		ErrorID: res.ErrorID, Asker: &asker, TurnExecutionID: res.ExecID}
	if res.Status != agent.Failed {
		reply.Text = ptr(res.Text)
	}
	replyClasses := cv.answerClasses(t.Classes, append(res.Tools, res.Memory...))
	reply.Classes = replyClasses
	// In owner mode a completed reply names the response that holds its text (version 5), and so
	// does the turn the window keeps, with its message's inbox position.
	var refs record.Refs
	if st.Mode == ModeOwner && res.Status == agent.Complete && res.ResponseAt > 0 {
		refs.Out = record.OutTo(res.ResponseAt, res.Text)
		t.In, t.Out = in, &respAt{Gen: c.Generation(), Seq: res.ResponseAt, Sum: refs.Out.Sum}
	}
	if _, err := cv.recordAt(c, st, record.ReplyID(t.Ord), reply, refs, nil); err != nil {
		return err
	}
	cv.hub.End(c.ID(), t.Turn)
	t.Reply, t.Status, t.Classes = res.Text, res.Status, replyClasses
	st.Window = append(st.Window, t)
	st.evict(len(st.Window) - cv.cfg.MaxWindowTurns)
	return nil
}
