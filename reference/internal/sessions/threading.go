package sessions

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// threadData adds a thread reply's parent to a user-message's data (none when parent is empty).
func threadData(d map[string]string, parent string) map[string]string {
	if parent != "" {
		d["parent"] = parent
	}
	return d
}

// holdsMessageLocked reports whether the session's log holds message m: a user-message's
// message or a reply's (its text-delta or text-done).
func (ss *session) holdsMessageLocked(m string) bool {
	for _, f := range ss.log.Frames() {
		switch f.Kind() {
		case stream.KindUserMessage, stream.KindTextDelta, stream.KindTextDone:
			if f.Message == m {
				return true
			}
		}
	}
	return false
}

// noteThreadLocked stores, durably, that who's message messageID, about to be sent to the
// conversation, is a thread reply to parent; added is false when the note was there already.
func (ss *session) noteThreadLocked(ctx context.Context, who loomtype.Identity, messageID, parent string) (added bool, err error) {
	q := ss.queue
	for _, n := range q.Threads {
		if n.Message == messageID && n.Asker == who.Key() {
			return false, nil
		}
	}
	q.Threads = append(append([]threadNote(nil), q.Threads...), threadNote{Message: messageID, Asker: who.Key(), Parent: parent})
	if n := len(q.Threads) - maxThreadNotes; n > 0 {
		q.Threads = q.Threads[n:]
	}
	return true, ss.commitQueue(ctx, nil, q)
}

// dropThreadLocked forgets the note of who's message messageID, durably.
func (ss *session) dropThreadLocked(ctx context.Context, who loomtype.Identity, messageID string) error {
	q := ss.queue
	for i, n := range q.Threads {
		if n.Message == messageID && n.Asker == who.Key() {
			q.Threads = append(append([]threadNote(nil), q.Threads[:i]...), q.Threads[i+1:]...)
			return ss.commitQueue(ctx, nil, q)
		}
	}
	return nil
}

// takeParentLocked returns the parent of the user record e ("": none) and forgets its note: the
// awaited picked-up message's own parent, else the note of e's message id, else (a shared
// conversation's records keep no message id) the oldest note of e's asker. The queue that no
// longer holds the note is written with the next commit.
func (ss *session) takeParentLocked(e loomtype.Entry) string {
	if ss.queue.Awaiting != "" && (e.MessageID == "" || e.MessageID == ss.queue.Awaiting) {
		for _, q := range ss.queue.Items {
			if q.Message == ss.queue.Awaiting {
				return q.Parent
			}
		}
	}
	asker := ""
	if e.Asker != nil {
		asker = e.Asker.Key()
	}
	for i, n := range ss.queue.Threads {
		if n.Asker != asker || e.MessageID != "" && n.Message != e.MessageID {
			continue
		}
		q := ss.queue
		q.Threads = append(append([]threadNote(nil), q.Threads[:i]...), q.Threads[i+1:]...)
		ss.extraQueue = &q
		ss.queue = q
		return n.Parent
	}
	return ""
}
