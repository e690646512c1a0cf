package conversation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/agent"
	"github.com/loomcheck/loomcheck/reference/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TurnFlowName is the kernel flow a shared-mode turn runs as, under its asker.
const TurnFlowName = "conversation.turn"

// Shared configures shared mode. Without a Service principal shared conversations cannot start.
type Shared struct {
	// Service is the host principal the coordinating execution runs as. No end-user identity
	// may equal it.
	Service *loomtype.Identity
}

func (s Shared) validate() error { return nil }

func (cv *Conversations) sharedStartCheck(owner loomtype.Identity, participants []loomtype.Identity) (loomtype.Identity, error) {
	return loomtype.Identity{}, fmt.Errorf("%w: shared mode is not available", loomtype.ErrBadRequest)
}

func (cv *Conversations) initParticipants(ctx context.Context, id string, owner loomtype.Identity, ps []loomtype.Identity) error {
	return fmt.Errorf("%w: shared mode is not available", loomtype.ErrBadRequest)
}

func (cv *Conversations) authorizeParticipant(ctx context.Context, m meta, principal loomtype.Identity, id string) error {
	return loomtype.ErrNotFound
}

func (cv *Conversations) sharedVoices(c *kernel.Context, st *state) func(envelope.Identity) bool {
	return func(envelope.Identity) bool { return false }
}

func (cv *Conversations) stillParticipant(c *kernel.Context, st *state, asker loomtype.Identity) (bool, error) {
	return false, nil
}

// visibleWindow is the part of the window the asker's turn may see.
func (cv *Conversations) visibleWindow(c *kernel.Context, st *state, asker loomtype.Identity) ([]turnMem, error) {
	return st.Window, nil
}

// contextClasses are the classes of what fed the turn's context.
func (cv *Conversations) contextClasses(c *kernel.Context, st *state, asker loomtype.Identity, window []turnMem, env *envelopeJSON) ([]string, error) {
	return nil, nil
}

// answerClasses are the classes of an answer: its context's plus its tools'.
func (cv *Conversations) answerClasses(context []string, tools []string) []string {
	return nil
}

func (cv *Conversations) sameAsker(m kernel.Message, asker loomtype.Identity) bool { return true }

func (cv *Conversations) runSharedTurn(c *kernel.Context, st *state, tr turnRun) (agent.Result, string, error) {
	return agent.Result{}, "", fmt.Errorf("conversation: shared mode is not available")
}

func (cv *Conversations) turnFlow(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	return nil, fmt.Errorf("conversation: shared mode is not available")
}

func (cv *Conversations) filter(ctx context.Context, viewer loomtype.Identity, entries []loomtype.Entry) []loomtype.Entry {
	return entries
}

// ParticipantList is what the participants routes answer.
type ParticipantList struct {
	Owner        loomtype.Identity   `json:"owner"`
	Participants []loomtype.Identity `json:"participants"`
}

// Participants lists a shared conversation's participants.
func (cv *Conversations) Participants(ctx context.Context, principal loomtype.Identity, id string) (ParticipantList, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return ParticipantList{}, err
	}
	return ParticipantList{Owner: m.owner, Participants: []loomtype.Identity{m.owner}}, nil
}

// ChangeParticipants adds or removes a participant (the owner only).
func (cv *Conversations) ChangeParticipants(ctx context.Context, principal loomtype.Identity, id, op string, who loomtype.Identity) (ParticipantList, error) {
	if _, err := cv.authorize(ctx, principal, id); err != nil {
		return ParticipantList{}, err
	}
	return ParticipantList{}, fmt.Errorf("%w: shared mode is not available", loomtype.ErrBadRequest)
}
