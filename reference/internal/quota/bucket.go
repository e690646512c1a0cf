package quota

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Posts is the bound on a principal's POST requests: perMinute of them a minute, and at once
// (gateway.postsPerMinute), kept as a token bucket refilled over a minute.
const Posts Kind = "posts"

// bucket is a principal's POST allowance: Tokens left at At (Unix milliseconds).
type bucket struct {
	Tokens float64 `json:"tokens"`
	At     int64   `json:"at"`
}

// refill adds to b what perMinute a minute gives from its time to now, up to perMinute.
func (b *bucket) refill(now int64, perMinute int) {
	if now > b.At {
		b.Tokens = min(float64(perMinute), b.Tokens+float64(now-b.At)/60_000*float64(perMinute))
		b.At = now
	}
}

// take refills b and takes one token if there is one.
func (b *bucket) take(now int64, perMinute int) bool {
	b.refill(now, perMinute)
	if b.Tokens < 1 {
		return false
	}
	b.Tokens--
	return true
}

// fresh is the bucket of a principal that has not posted: full.
func fresh(now int64, perMinute int) bucket { return bucket{Tokens: float64(perMinute), At: now} }

// bucketTable holds, under the hex SHA-256 of a principal's key, its POST allowance.
var bucketTable = kernel.NewTable[bucket]("quota.buckets", 1)

// Take is Counter.Take: one transaction that reads who's bucket, refills it and takes a token.
func (s *Shared) Take(ctx context.Context, who loomtype.Identity, perMinute int, now int64) error {
	key := recordKey(Posts, who)
	var refused error
	err := s.k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error {
		refused = nil
		b, ok, err := bucketTable.Get(ctx, tx, key)
		if err != nil {
			return err
		}
		if !ok {
			b = fresh(now, perMinute)
		}
		if !b.take(now, perMinute) {
			refused = &Refusal{Kind: Posts, Max: perMinute}
			return nil
		}
		return bucketTable.Put(tx, key, b)
	})
	if err != nil {
		return err
	}
	return refused
}

// Take is Counter.Take. The buckets of principals whose allowance is whole again are forgotten
// once more than 10 000 are kept.
func (m *Memory) Take(_ context.Context, who loomtype.Identity, perMinute int, now int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[who]
	if !ok {
		if len(m.buckets) > 10_000 {
			for k, v := range m.buckets {
				if v.refill(now, perMinute); v.Tokens >= float64(perMinute) {
					delete(m.buckets, k)
				}
			}
		}
		if m.buckets == nil {
			m.buckets = map[loomtype.Identity]*bucket{}
		}
		nb := fresh(now, perMinute)
		b = &nb
		m.buckets[who] = b
	}
	if !b.take(now, perMinute) {
		return &Refusal{Kind: Posts, Max: perMinute}
	}
	return nil
}
