package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// IdentityKey is the identity's key (loomtype.Identity.Key), each field escaped so that no two
// identities share it.
func IdentityKey(id loomtype.Identity) string { return record.IdentityKey(id) }

// ErrDelegation refuses a delegated asker the host does not map to a narrowed principal.
var ErrDelegation = errors.New("conversation: a delegated asker is refused in a shared conversation")

// Shared configures shared mode (record.Shared).
type Shared = record.Shared

// Defaults of shared mode.
const (
	DefaultMaxParticipants   = record.DefaultMaxParticipants
	DefaultMaxQueuedPerAsker = record.DefaultMaxQueuedPerAsker
	// Unclassified is the class of a tool the host declared no class for.
	Unclassified = record.Unclassified
)

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
		if a, ok := record.SignedAskerOf(cv.cfg.Keys, id, m.Payload); ok && a.Equal(asker) {
			n++
		}
	}
	if n >= max {
		return &loomtype.LimitError{Limit: "queued turns per asker", Max: int64(max)}
	}
	return nil
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
		case len(e.Classes) == 0 || record.ClearedCached(ctx, cv.deps.Cleared, viewer, e.Classes, cache):
			e.TurnExecutionID = ""
		default:
			e = loomtype.Entry{Cursor: e.Cursor, Ord: e.Ord, Turn: e.Turn, Role: e.Role, Status: loomtype.StatusRestricted,
				Time: e.Time, Asker: e.Asker}
		}
		out[i] = e
	}
	return out
}
