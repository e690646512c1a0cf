package sqlite

// The heads of streams the writer has seen, so that an Append whose caller passes the head it
// expects needs no read of the events table: the store's handle is the only writer of its file
// (one process opens a file at a time, and its writes all go through the one writer connection),
// so a head it read or committed stays the head until it commits again.
//
// Three layers, all touched only by whoever runs the transaction in progress (under wmu):
//
//   - heads: the committed heads, bounded (two generations of at most headsKept each: a head used
//     again moves to the newer one, the older generation is dropped whole when the newer fills).
//   - pending: the heads the transaction in progress changed, moved to heads when it commits and
//     dropped when it rolls back.
//   - undo: what the Update in progress changed in pending, put back when its savepoint rolls
//     back.
//
// A commit whose outcome is unknown (COMMIT failed) drops every head: they are read again.

// headsKept bounds each generation of the cache of committed heads.
const headsKept = 4096

type headKey struct {
	stream string
	gen    int64
}

// headCache is the bounded cache of committed heads.
type headCache struct {
	cur, old map[headKey]int64
}

func (c *headCache) get(k headKey) (int64, bool) {
	if h, ok := c.cur[k]; ok {
		return h, true
	}
	h, ok := c.old[k]
	if ok {
		c.put(k, h)
	}
	return h, ok
}

func (c *headCache) put(k headKey, h int64) {
	if c.cur == nil {
		c.cur = make(map[headKey]int64)
	}
	if _, ok := c.cur[k]; !ok && len(c.cur) >= headsKept {
		c.old, c.cur = c.cur, make(map[headKey]int64, headsKept)
	}
	c.cur[k] = h
}

func (c *headCache) drop(k headKey) {
	delete(c.cur, k)
	delete(c.old, k)
}

func (c *headCache) reset() { c.cur, c.old = nil, nil }

// len is the number of heads kept (both generations; a head in both counts twice).
func (c *headCache) len() int { return len(c.cur) + len(c.old) }

// headUndo is one change to pending: k was h (ok) or absent before it.
type headUndo struct {
	k  headKey
	h  int64
	ok bool
}
