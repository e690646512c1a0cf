package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// MaxCacheScope bounds the length of a run's cacheScope.
const MaxCacheScope = 256

// DefaultCacheEntries bounds the response cache when Deps.CacheEntries is 0.
const DefaultCacheEntries = 1024

// ResponseCache keeps model responses, keyed on the request as written (model, messages, tools)
// and partitioned by the principal the run acts for and by the run's cacheScope: two runs share an
// entry only when all of those are equal. Only answers that completed are kept. It lives in the
// process (a restart empties it; the journal, not the cache, is what a replay serves). When full,
// it makes room by forgetting one answer of the principal that holds the most (the one adding,
// when it holds as many as any): one principal asking many questions only ever pushes out its own
// answers, never those of a principal that holds fewer.
//
// Safe for concurrent use.
//
//	c := run.NewResponseCache(0)
//	p := c.Provider(base, alice, "tenant-acme")
type ResponseCache struct {
	max     int
	mu      sync.Mutex
	entries map[string]model.Response
	// held are the keys of entries each principal's runs put there (a key names one principal).
	held map[loomtype.Identity]map[string]struct{}
}

// NewResponseCache returns an empty cache of at most max entries (0: DefaultCacheEntries).
//
//	rs := run.New(run.Deps{Provider: p, Cache: run.NewResponseCache(0)})
func NewResponseCache(max int) *ResponseCache {
	if max <= 0 {
		max = DefaultCacheEntries
	}
	return &ResponseCache{max: max, entries: map[string]model.Response{}, held: map[loomtype.Identity]map[string]struct{}{}}
}

// Cache is where the runs' model responses are kept: ResponseCache in the process, StoredCache
// in a store every engine of a database shares. A key is the digest of the principal, the scope
// and the request (it names one principal). Implementations are safe for concurrent use.
type Cache interface {
	// Lookup is the answer kept under key, if any.
	Lookup(ctx context.Context, key string) (model.Response, bool, error)
	// Keep keeps resp under key for who, making room as the spec says when the cache is full.
	Keep(ctx context.Context, who loomtype.Identity, key string, resp model.Response) error
}

var _ Cache = (*ResponseCache)(nil)

// Lookup implements Cache.
func (rc *ResponseCache) Lookup(_ context.Context, key string) (model.Response, bool, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	resp, ok := rc.entries[key]
	return resp, ok, nil
}

// Keep implements Cache.
func (rc *ResponseCache) Keep(_ context.Context, who loomtype.Identity, key string, resp model.Response) error {
	rc.put(who, key, resp)
	return nil
}

// Provider returns base behind the cache, in the partition of who and scope.
//
//	p := cache.Provider(base, alice, "acme")
func (rc *ResponseCache) Provider(base model.Provider, who loomtype.Identity, scope string) model.Provider {
	return cachedProviderOf(rc, base, who, scope)
}

// cachedProviderOf returns base behind c, in the partition of who and scope.
func cachedProviderOf(c Cache, base model.Provider, who loomtype.Identity, scope string) model.Provider {
	return &cachedProvider{rc: c, base: base, who: who, scope: scope}
}

type cachedProvider struct {
	rc    Cache
	base  model.Provider
	who   loomtype.Identity
	scope string
}

// key is the digest of the partition and the request as written.
func (p *cachedProvider) key(req model.Request) string {
	b, _ := json.Marshal(struct {
		Who      loomtype.Identity `json:"who"`
		Scope    string            `json:"scope"`
		Model    string            `json:"model"`
		Messages []model.Message   `json:"messages"`
		Tools    []model.Tool      `json:"tools"`
	}{p.who, p.scope, req.Model, req.Messages, req.Tools})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Complete implements model.Provider: a cached answer is handed back (its text given to onDelta
// once) without a model call; anything else is asked of the model and kept if it completed. A
// cache that cannot be read is a miss, and one that cannot keep the answer still hands it back:
// the cache saves model calls, it never decides an answer.
func (p *cachedProvider) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	k := p.key(req)
	resp, ok, err := p.rc.Lookup(ctx, k)
	if err == nil && ok {
		if onDelta != nil && resp.Content != "" {
			onDelta(resp.Content)
		}
		return resp, nil
	}
	resp, err = p.base.Complete(ctx, req, onDelta)
	if err != nil {
		return resp, err
	}
	_ = p.rc.Keep(ctx, p.who, k, resp)
	return resp, nil
}

// put keeps resp under k for who, first making room when the cache is full: one entry of the
// principal holding the most goes (who's own when who holds as many as any).
func (rc *ResponseCache) put(who loomtype.Identity, k string, resp model.Response) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.entries[k]; !ok && len(rc.entries) >= rc.max {
		victim, most := who, len(rc.held[who])
		for id, keys := range rc.held {
			if len(keys) > most {
				victim, most = id, len(keys)
			}
		}
		for old := range rc.held[victim] {
			delete(rc.entries, old)
			delete(rc.held[victim], old)
			break
		}
		if len(rc.held[victim]) == 0 {
			delete(rc.held, victim)
		}
	}
	rc.entries[k] = resp
	if rc.held[who] == nil {
		rc.held[who] = map[string]struct{}{}
	}
	rc.held[who][k] = struct{}{}
}

// checkCacheScope refuses, naming "cacheScope", a run without one when the system caches model
// responses, and one that is too long.
func (rs *Runs) checkCacheScope(opt Options) error {
	if rs.deps.Cache != nil && opt.CacheScope == "" {
		return loomtype.BadRequest("cacheScope", "")
	}
	if len(opt.CacheScope) > MaxCacheScope {
		return loomtype.BadRequest("cacheScope", "")
	}
	return nil
}

// provider is the model a run of who asks: behind the response cache when there is one.
func (rs *Runs) provider(who loomtype.Identity, opt Options) model.Provider {
	if rs.deps.Cache == nil {
		return rs.deps.Provider
	}
	return cachedProviderOf(rs.deps.Cache, rs.deps.Provider, who, opt.CacheScope)
}
