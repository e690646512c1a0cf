package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// The records of StoredCache, in the record tables of the kernel it is given. Their names and
// shapes are on-disk: never change them without raising the version.
var (
	// cacheEntries holds each kept answer under its key (the digest of cachedProvider.key).
	cacheEntries = kernel.NewTable[model.Response]("runs.cache", 1)
	// cacheHeld holds, under the hex SHA-256 of a principal's key, the keys its runs put there,
	// oldest first.
	cacheHeld = kernel.NewTable[[]string]("runs.cache.held", 1)
	// cacheCounts holds, under cacheCountsKey, how many entries each principal holds (by the
	// same hex name): the whole size of the cache and who holds the most, read in one record.
	cacheCounts = kernel.NewTable[map[string]int]("runs.cache.counts", 1)
)

const cacheCountsKey = "all"

// StoredCache is the response cache kept in a store, so that every engine of a database (each
// partition's, on any node) answers from the same entries: a principal's runs share them
// wherever their ids put them, as the spec shares them across all of a principal's runs. Each
// Keep reads and rewrites the counts in one transaction, which the store serializes with any
// other, so the bound and the share of each principal hold across engines. It commits relaxed
// (kernel.UpdateRelaxed): a machine crash may forget the newest answers, which only costs model
// calls. Safe for concurrent use.
type StoredCache struct {
	k   *kernel.Kernel
	max int
}

var _ Cache = (*StoredCache)(nil)

// OpenStoredCache opens the cache of at most max entries (0: DefaultCacheEntries) kept in k's
// store: a kernel every engine that shares the cache opens on the same view.
//
// Errors: kernel table errors, store errors.
//
//	c, err := run.OpenStoredCache(ctx, globalKernel, 0)
func OpenStoredCache(ctx context.Context, k *kernel.Kernel, max int) (*StoredCache, error) {
	if max <= 0 {
		max = DefaultCacheEntries
	}
	for _, t := range []interface {
		Open(context.Context, *kernel.Kernel) error
	}{cacheEntries, cacheHeld, cacheCounts} {
		if err := t.Open(ctx, k); err != nil {
			return nil, err
		}
	}
	return &StoredCache{k: k, max: max}, nil
}

// Provider returns base behind the cache, in the partition of who and scope.
//
//	p := cache.Provider(base, alice, "acme")
func (c *StoredCache) Provider(base model.Provider, who loomtype.Identity, scope string) model.Provider {
	return cachedProviderOf(c, base, who, scope)
}

func principalName(who loomtype.Identity) string {
	sum := sha256.Sum256([]byte(who.Key()))
	return hex.EncodeToString(sum[:])
}

// Lookup implements Cache, in a transaction that writes nothing.
func (c *StoredCache) Lookup(ctx context.Context, key string) (model.Response, bool, error) {
	var (
		resp model.Response
		ok   bool
	)
	err := c.k.Update(ctx, func(tx *kernel.Tx) error {
		var err error
		resp, ok, err = cacheEntries.Get(ctx, tx, key)
		return err
	})
	return resp, ok, err
}

// Keep implements Cache: when the cache is full, the oldest entry of the principal holding the
// most goes first (who's own when who holds as many as any).
func (c *StoredCache) Keep(ctx context.Context, who loomtype.Identity, key string, resp model.Response) error {
	name := principalName(who)
	return c.k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error {
		if _, ok, err := cacheEntries.Get(ctx, tx, key); err != nil || ok {
			return err
		}
		counts, _, err := cacheCounts.Get(ctx, tx, cacheCountsKey)
		if err != nil {
			return err
		}
		if counts == nil {
			counts = map[string]int{}
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		if total >= c.max {
			if err := c.evict(ctx, tx, counts, name); err != nil {
				return err
			}
		}
		held, _, err := cacheHeld.Get(ctx, tx, name)
		if err != nil {
			return err
		}
		counts[name]++
		if err := cacheEntries.Put(tx, key, resp); err != nil {
			return err
		}
		if err := cacheHeld.Put(tx, name, append(held, key)); err != nil {
			return err
		}
		return cacheCounts.Put(tx, cacheCountsKey, counts)
	})
}

// evict forgets the oldest entry of the principal holding the most in counts (name's own when
// name holds as many as any), and counts it out of counts.
func (c *StoredCache) evict(ctx context.Context, tx *kernel.Tx, counts map[string]int, name string) error {
	victim, most := name, counts[name]
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if counts[n] > most {
			victim, most = n, counts[n]
		}
	}
	held, _, err := cacheHeld.Get(ctx, tx, victim)
	if err != nil || len(held) == 0 {
		return err
	}
	if err := cacheEntries.Delete(tx, held[0]); err != nil {
		return err
	}
	if counts[victim]--; counts[victim] <= 0 {
		delete(counts, victim)
	}
	if len(held) == 1 {
		return cacheHeld.Delete(tx, victim)
	}
	return cacheHeld.Put(tx, victim, held[1:])
}
