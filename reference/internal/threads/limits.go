package threads

import (
	"context"
	"net/http"
	"time"
)

// bucket is what a connection's peer may still present: tokens, as counted at.
type bucket struct {
	tokens float64
	at     time.Time
}

// limit counts one text the peer presents on connection cid against the connection's rate
// (spec/peer.md, The wire): up to rate texts at once, and rate more each minute. A revoked
// connection is answered connection first, as the table orders. It returns the rejection, or
// nil when the text may go on to the other checks.
func (s *Service) limit(ctx context.Context, cid string) (*Rejection, error) {
	var c connRec
	if ok, err := s.read(ctx, tabConn, cid, &c); err != nil {
		return nil, err
	} else if ok && c.State == connRevoked {
		return reject(http.StatusUnauthorized, ReasonConnection, ""), nil
	}
	rate := float64(DefaultRate)
	if conn := s.conns[cid]; conn != nil && conn.Rate > 0 {
		rate = float64(conn.Rate)
	}
	now := time.Now()
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.rates == nil {
		s.rates = map[string]*bucket{}
	}
	b := s.rates[cid]
	if b == nil {
		b = &bucket{tokens: rate, at: now}
		s.rates[cid] = b
	}
	b.tokens = min(rate, b.tokens+now.Sub(b.at).Minutes()*rate)
	b.at = now
	if b.tokens < 1 {
		return reject(http.StatusTooManyRequests, ReasonRate, ""), nil
	}
	b.tokens--
	return nil, nil
}
