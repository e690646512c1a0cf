package postgres

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier gathers the wake-ups of this handle's commits that finish together into one
// notifying transaction. A notifying transaction is not free on the server: it takes a
// transaction id and a lock of the whole database through its commit, and wakes every listening
// session of every node. One sender at a time sends them: a commit that finds nobody sending
// sends its own wake-up with its COMMIT, in the same round trip, and with it those of the commits
// that finished meanwhile; a commit that finds a sender at work commits alone and hands its
// wake-up to the sender, which sends everything handed to it in one more notification before it
// stops (after one such notification, it appoints the first commit still waiting to go on, so
// that no commit sends for others for long). Every Update that appended returns only once its wake-up was sent (or failed to be), as
// when each commit sent its own.
type notifier struct {
	mu      sync.Mutex
	sending bool
	pending []string // payloads handed to the sender, of commits already visible
	// waiters are the commits of the pending payloads, each closed once they were sent, or sent
	// true when it becomes the sender.
	waiters []chan bool
}

// take empties the pending payloads and their waiters.
func (n *notifier) take() ([]string, []chan bool) {
	p, w := n.pending, n.waiters
	n.pending, n.waiters = nil, nil
	return p, w
}

// commitAndNotify commits t and, when it appended, has its streams notified before it returns:
// the notification goes out once the commit is visible, and is not part of the transaction (a
// notifying transaction would hold a lock of the whole database through its commit, so commits
// could not share a WAL flush). A notification that fails after a commit is not the write's
// failure: a wake-up is only a hint, and a lost one costs a reader one read.
func (s *Postgres) commitAndNotify(conn *pgxpool.Conn, t *tx) (pgconn.CommandTag, error) {
	ctx, cancel := s.stmtCtx()
	defer cancel()
	if len(t.touched) == 0 {
		return conn.Exec(ctx, "COMMIT")
	}
	own := make([]string, 0, len(t.touched))
	for st := range t.touched {
		own = append(own, payloadOf(st))
	}
	n := &s.notes
	n.mu.Lock()
	if !n.sending {
		// Nobody sends (and nothing waits: payloads are handed over only to a sender): the
		// COMMIT and this commit's notification go in one round trip, and this commit sends
		// what is handed over meanwhile.
		n.sending = true
		n.mu.Unlock()
		tag, err := s.commitThenNotify(ctx, conn, own)
		s.sendHandedOver(ctx, conn)
		return tag, err
	}
	n.mu.Unlock()
	tag, err := conn.Exec(ctx, "COMMIT")
	if err != nil || tag.String() == "ROLLBACK" {
		return tag, err
	}
	n.mu.Lock()
	if !n.sending {
		n.sending = true
		n.mu.Unlock()
		s.notify(ctx, conn, own)
		s.sendHandedOver(ctx, conn)
		return tag, nil
	}
	ch := make(chan bool, 1)
	n.pending = append(n.pending, own...)
	n.waiters = append(n.waiters, ch)
	n.mu.Unlock()
	if <-ch {
		s.sendHandedOver(ctx, conn)
	}
	return tag, nil
}

// sendHandedOver is the sender's last duty: it notifies, on conn, whatever was handed to it,
// then stops being the sender, or, when more was handed over meanwhile, appoints the first of
// those commits as the sender.
func (s *Postgres) sendHandedOver(ctx context.Context, conn *pgxpool.Conn) {
	n := &s.notes
	for round := 0; ; round++ {
		n.mu.Lock()
		if len(n.pending) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		if round == 1 {
			next := n.waiters[0]
			n.mu.Unlock()
			next <- true
			return
		}
		p, done := n.take()
		n.mu.Unlock()
		s.notify(ctx, conn, p)
		release(done)
	}
}

// commitThenNotify sends COMMIT and the notification of payloads in one round trip; the
// notification's result is not the commit's.
func (s *Postgres) commitThenNotify(ctx context.Context, conn *pgxpool.Conn, payloads []string) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue("COMMIT")
	b.Queue(s.q.notify, s.channel, payloads)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	tag, err := br.Exec()
	if err != nil || tag.String() == "ROLLBACK" {
		return tag, err
	}
	_, _ = br.Exec()
	return tag, nil
}

// notify sends one notification of payloads in a transaction of its own; its failure is only a
// lost hint.
func (s *Postgres) notify(ctx context.Context, conn *pgxpool.Conn, payloads []string) {
	if len(payloads) > 0 {
		_, _ = conn.Exec(ctx, s.q.notify, s.channel, payloads)
	}
}

// release tells the commits of done that their wake-ups were sent.
func release(done []chan bool) {
	for _, ch := range done {
		close(ch)
	}
}
