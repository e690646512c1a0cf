package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// AuthorizeRuntime applies the runtime door's owner-scoped policy: only the principal an
// execution runs as may use the door on it; to anyone else it does not exist.
//
// Errors: loomtype.ErrNotFound.
//
// Like Authorize, it reads the execution record from the store whatever the kernel holds in
// memory, and a refusal takes at least NotFoundFloor: a missing id and another's cost the same.
func (cv *Conversations) AuthorizeRuntime(ctx context.Context, principal loomtype.Identity, id string) (kernel.Info, error) {
	start := time.Now()
	k := cv.kernel()
	// A missing record is decoded all the same (a stand-in): no record costs what another's costs.
	stored, err := k.StoredInfo(ctx, id)
	if err != nil || !principal.Valid() || !stored.Principal.Equal(principal) {
		floor(ctx, start)
		return kernel.Info{}, loomtype.ErrNotFound
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		floor(ctx, start)
		return kernel.Info{}, loomtype.ErrNotFound
	}
	return info, nil
}

// SendRaw is the runtime door: it delivers payload into the inbox unchanged, as principal,
// under the runtime's owner-scoped policy (only the principal the execution runs as may use it).
func (cv *Conversations) SendRaw(ctx context.Context, principal loomtype.Identity, id, messageID string, payload json.RawMessage) (bool, error) {
	k := cv.kernel()
	if _, err := cv.AuthorizeRuntime(ctx, principal, id); err != nil {
		return false, err
	}
	if !validMessageID(messageID) {
		return false, loomtype.BadRequest("messageId", "")
	}
	return k.Send(ctx, id, principal, messageID, payload)
}

// TurnIDPrefix is how every turn execution id of conversation id begins ("turn:<id>:").
func TurnIDPrefix(id string) string { return "turn:" + id + ":" }

// StartRaw is the runtime door's start: an execution of flow owned by principal. Only the
// shared-mode turn flow may be started this way (an asker starts their own turn), and only for a
// conversation principal may touch: the input's conversationId must name one, else the answer
// is loomtype.ErrNotFound, as for a conversation that does not exist, and nothing starts; the id
// must begin with TurnIDPrefix of that conversation (loomtype.ErrBadRequest otherwise). What
// such an execution does never reaches the conversation: a recovery adopts an execution found at
// a turn's id only after verifying it, and the live hub takes output only from the turn the
// dialogue runs.
//
// Errors: loomtype.ErrUnauthenticated, loomtype.ErrBadRequest (another flow, a bad id),
// loomtype.ErrNotFound (no conversation the caller may touch), loomtype.ErrConflict (the id is
// taken).
//
//	err := cv.StartRaw(ctx, bob, conversation.TurnIDPrefix("c1")+"x", conversation.TurnFlowName, input)
func (cv *Conversations) StartRaw(ctx context.Context, principal loomtype.Identity, id, flow string, input json.RawMessage) error {
	if !principal.Valid() {
		return loomtype.ErrUnauthenticated
	}
	if flow != TurnFlowName {
		return loomtype.BadRequest("flow", "")
	}
	var names struct {
		ConversationID string `json:"conversationId"`
	}
	if json.Unmarshal(input, &names) != nil {
		return loomtype.ErrNotFound
	}
	if err := cv.Authorize(ctx, principal, names.ConversationID); err != nil {
		return err
	}
	// Its id lies inside that conversation's turn ids, which no conversation id can be (a
	// conversation id holds no ':'): the door neither takes an id a conversation may need nor
	// tells whether one is taken.
	if !strings.HasPrefix(id, TurnIDPrefix(names.ConversationID)) {
		return loomtype.BadRequest("id", "")
	}
	_, err := cv.kernel().Start(ctx, kernel.StartRequest{ID: id, Flow: flow, Input: input, Principal: principal})
	switch {
	case errors.Is(err, loomtype.ErrAlreadyStarted):
		return loomtype.ErrConflict
	case errors.Is(err, kernel.ErrBadID):
		return loomtype.BadRequest("id", "")
	}
	return err
}

// RawEvent is one event of an execution's log as the runtime door shows it.
type RawEvent struct {
	Cursor string          `json:"cursor"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

// RawLog is the runtime door's query: the unfiltered log, for the principal the execution runs
// as only.
func (cv *Conversations) RawLog(ctx context.Context, principal loomtype.Identity, id string, after loomtype.Cursor, limit int) ([]RawEvent, loomtype.Cursor, bool, error) {
	if _, err := cv.AuthorizeRuntime(ctx, principal, id); err != nil {
		return nil, after, false, err
	}
	// A cursor past the newest generation is clamped to its end, and reads back as itself.
	evs, next, done, err := cv.kernel().LogPage(ctx, id, after, limit)
	if err != nil {
		return nil, after, false, err
	}
	var out []RawEvent
	for _, e := range evs {
		d := e.Data
		if len(d) == 0 || !json.Valid(d) {
			d = json.RawMessage("null")
		}
		out = append(out, RawEvent{Cursor: e.Cursor().String(), Kind: e.Kind, Data: d})
	}
	return out, next, done, nil
}
