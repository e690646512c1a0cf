package sessions

import "github.com/loomcheck/loomcheck/reference/loomtype"

// EndReason says why the service ended a reader's subscription for good: the reader must not
// resume (spec/stream.md, Group chats: a removed person's streams end).
type EndReason string

// EndRemoved: the reader's person was removed from the chat.
const EndRemoved EndReason = "removed"

// readerKey is the key of a reader's identity: its identity key (loomtype.Identity.Key), which
// no two identities share.
func readerKey(who loomtype.Identity) string { return who.Key() }

// endReadersLocked ends, for reason, every subscription of who to the session: each is taken
// off the session, so nothing more is queued for it, and cut off with its reason (ss.mu held).
func (ss *session) endReadersLocked(who loomtype.Identity, reason EndReason) {
	k := readerKey(who)
	for s := range ss.subs {
		if s.reader == k {
			s.ended = reason
			delete(ss.subs, s)
			s.cut()
		}
	}
}

// Ended is why the service ended the subscription for good, once Done is closed; "" when it
// did not (a cut-off reader resumes from its cursor).
func (s *Sub) Ended() EndReason {
	select {
	case <-s.done:
		return s.ended
	default:
		return ""
	}
}
