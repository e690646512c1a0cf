package sessions

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// privateKey is the key a private message is stored once under: its sender's identity key
// (loomtype.Identity.Key) and its message id, as a JSON array, so that no two (sender, id) pairs
// share a key. A message id is its sender's own: another person's message under the same id is
// another message.
func privateKey(who loomtype.Identity, messageID string) string {
	b, _ := json.Marshal([]string{who.Key(), messageID})
	return string(b)
}

// personName is who's name in the frames of a session whose owner belongs to ownerTenant
// (spec/stream.md, Group chats): person:<actor> for one of the owner's tenant who acts for no
// one and whose actor holds none of "%", "/" and "~", else person:<identity key>. The first
// form never holds a "/" and the second always does, and the identity key is injective, so two
// identities never share a name in one session: room membership, authorship and every
// per-person decision made by name are made by the whole identity.
//
//	personName("acme", loomtype.Identity{Tenant: "acme", Actor: "alice"})   // "person:alice"
//	personName("acme", loomtype.Identity{Tenant: "globex", Actor: "alice"}) // "person:globex/alice"
func personName(ownerTenant string, who loomtype.Identity) string {
	if who.Tenant == ownerTenant && who.OnBehalfOf == "" && !strings.ContainsAny(who.Actor, "%/~") {
		return "person:" + who.Actor
	}
	return "person:" + who.Key()
}

// ownerBook remembers the tenant of each session's owner, learnt when a caller the conversation
// authorizes first touches the session (a conversation's owner never changes). The zero value
// is ready; it is bounded by maxHeld, past which it starts over and learns again.
type ownerBook struct {
	mu      sync.Mutex
	tenants map[string]string
}

func (b *ownerBook) get(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tenants[id]
	return t, ok
}

func (b *ownerBook) put(id, tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tenants == nil || len(b.tenants) >= maxHeld {
		b.tenants = map[string]string{}
	}
	b.tenants[id] = tenant
}

// authorize decides, as the conversation does, whether who may touch session id, and learns
// the session's owner the first time (so that names are drawn before anything is projected).
//
// Errors: loomtype.ErrNotFound, errors of the conversation layer.
func (s *Service) authorize(ctx context.Context, who loomtype.Identity, id string) error {
	if _, ok := s.owners.get(id); ok {
		return s.cv.Authorize(ctx, who, id)
	}
	pl, err := s.cv.Participants(ctx, who, id)
	if err != nil {
		return err
	}
	s.owners.put(id, pl.Owner.Tenant)
	return nil
}

// learnOwner learns session id's owner as who, a caller already authorized to read it (the
// connection routes authorize before they hold or subscribe), unless it is known; a refusal
// learns nothing and is left to the caller's own checks.
func (s *Service) learnOwner(ctx context.Context, who loomtype.Identity, id string) {
	if _, ok := s.owners.get(id); ok {
		return
	}
	if pl, err := s.cv.Participants(ctx, who, id); err == nil {
		s.owners.put(id, pl.Owner.Tenant)
	}
}

// nameOf is who's name in session id's frames (personName, with the owner's tenant learnt by
// authorize; before that, every name is the identity-key form).
func (s *Service) nameOf(id string, who loomtype.Identity) string {
	t, ok := s.owners.get(id)
	if !ok {
		return "person:" + who.Key()
	}
	return personName(t, who)
}

// name is who's name in the session's frames.
func (ss *session) name(who loomtype.Identity) string { return ss.svc.nameOf(ss.id, who) }
