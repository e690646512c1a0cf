package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The listener is one connection per store handle, outside the pool, that LISTENs on the store's
// channel and wakes the handle's subscribers of the stream each notification names. It is only
// the wake-up: when its connection is lost it reconnects (retrying with a growing pause, at most
// listenRetryMax apart) and, once listening again, wakes every subscriber once, since a commit may
// have gone unannounced meanwhile. A silently dropped connection is noticed by TCP keep-alive.

const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 2 * time.Second
)

// connectListener opens the listening connection and LISTENs.
func (s *Postgres) connectListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.listenC.Copy())
	if err != nil {
		return nil, fmt.Errorf("store: %s: listen: %w", s.where, err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(s.channel)); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: %s: listen: %w", s.where, err)
	}
	s.listenPID.Store(conn.PgConn().PID())
	return conn, nil
}

// listen serves notifications until ctx ends, reconnecting when the connection is lost.
func (s *Postgres) listen(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listenDone)
	for {
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				break
			}
			s.pidMu.Lock()
			_, mine := s.pids[n.PID]
			s.pidMu.Unlock()
			if !mine { // this handle's commits woke its subscribers already
				s.wake(n.Payload)
			}
		}
		s.listenPID.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		for pause := listenRetryMin; ; pause = min(2*pause, listenRetryMax) {
			var err error
			if conn, err = s.connectListener(ctx); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
		}
		// Listening again: whatever was committed meanwhile is in the tables, and each woken
		// subscriber reads it.
		s.wakeAll()
	}
}
