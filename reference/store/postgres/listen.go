package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The listener is one connection per store handle, outside the pool, that LISTENs on the store's
// channel and wakes the handle's subscribers of the stream each notification names. It is opened
// at the first Subscribe, which returns once it listens: a handle no one subscribes to (a
// follower node's, which forwards every request) never opens it. It is only the wake-up: when
// its connection is lost, or could not be made at the first Subscribe within listenFirstWait, it
// connects in the background (retrying with a growing pause, at most listenRetryMax apart) and,
// once listening, wakes every subscriber once, since a commit may have gone unannounced
// meanwhile. A silently dropped connection is noticed by TCP keep-alive.

const (
	listenRetryMin  = 50 * time.Millisecond
	listenRetryMax  = 2 * time.Second
	listenFirstWait = 5 * time.Second
)

// startListening starts the listener unless it was started or the store let go of its
// connections: it connects and LISTENs (within listenFirstWait; past it, or on an error, the
// listener goes on connecting in the background).
func (s *Postgres) startListening() {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	if s.listening {
		return
	}
	s.listening = true
	ctx, cancel := context.WithTimeout(context.Background(), listenFirstWait)
	conn, err := s.connectListener(ctx)
	cancel()
	if err != nil {
		conn = nil
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stopListen = stop
	go s.listen(lctx, conn)
}

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

// listen serves notifications until ctx ends, reconnecting when the connection is lost (and
// connecting first when conn is nil).
func (s *Postgres) listen(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listenDone)
	for {
		if conn == nil {
			if conn = s.reconnectListener(ctx); conn == nil {
				return
			}
			// Listening: whatever was committed meanwhile is in the tables, and each woken
			// subscriber reads it.
			s.wakeAll()
		}
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
		conn = nil
		if ctx.Err() != nil {
			return
		}
	}
}

// reconnectListener connects and LISTENs until it succeeds (nil once ctx ends), with a growing
// pause between tries.
func (s *Postgres) reconnectListener(ctx context.Context) *pgx.Conn {
	for pause := listenRetryMin; ; pause = min(2*pause, listenRetryMax) {
		if conn, err := s.connectListener(ctx); err == nil {
			return conn
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
	}
}

// Subscribe returns a channel that receives a value (coalesced, never blocking a writer) after
// each commit that appended to stream, whoever committed it: this handle (the channel is
// signalled before its Update returns) or another handle or node on the same store (signalled
// when the notification arrives). It also receives one value whenever the store's listening
// connection was lost and is back, since a commit may have gone unannounced meanwhile. The first
// Subscribe of a handle opens that connection and returns once it listens. cancel ends the
// subscription; calling it twice is harmless. After Close or Kill the channel never fires.
//
//	ch, cancel := st.Subscribe("x/exec-1")
//	defer cancel()
//	for range ch { /* read from the last seq seen */ }
func (s *Postgres) Subscribe(stream string) (<-chan struct{}, func()) {
	sb := &sub{ch: make(chan struct{}, 1)}
	if s.shut.Load() {
		return sb.ch, func() {}
	}
	key := payloadOf(stream)
	s.subMu.Lock()
	m := s.subs[key]
	if m == nil {
		m = map[*sub]struct{}{}
		s.subs[key] = m
	}
	m[sb] = struct{}{}
	s.subMu.Unlock()
	s.startListening()
	var once sync.Once
	return sb.ch, func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.subs[key], sb)
			if len(s.subs[key]) == 0 {
				delete(s.subs, key)
			}
			s.subMu.Unlock()
		})
	}
}

// wake signals the subscribers under the given payloads.
func (s *Postgres) wake(keys ...string) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, k := range keys {
		for sb := range s.subs[k] {
			signal(sb.ch)
		}
	}
}

// wakeAll signals every subscriber.
func (s *Postgres) wakeAll() {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, m := range s.subs {
		for sb := range m {
			signal(sb.ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
