package queue

import (
	"sync"
	"sync/atomic"

	"github.com/petrelmq/petrel/message"
)

// bodyCache keeps the bytes of the shared bodies stored last, up to a
// byte budget, so that the subscriptions of a topic that trail its
// publisher refill their copies from memory instead of each reading the
// same body from disk: that read was most of a trailing refill's cost.
// Bodies leave it oldest first (ids only grow) and when they are freed.
//
// It also bounds the decoded messages its bodies hold (see bodyData), by
// a budget of their own, half the bytes budget: decoded messages take
// three to four times the bytes of a small body, and counting them in
// the bytes budget kept a quarter as many bodies, which sent subscribers
// that drain a backlog to disk for bodies. Past that budget, the decoded
// messages made first are dropped first (their bodies stay): consumers
// decode in publish order, so those are the ones every subscription has
// passed, or will soonest.
type bodyCache struct {
	mu    sync.Mutex
	m     map[int64]*bodyData
	order []int64 // ids in the order they came in; freed ones are skipped
	head  int
	bytes int
	max   int

	// decoded lists the ids of the bodies charged for a decoded message,
	// in the order they were; dbytes is the charge, at most dmax.
	decoded []int64
	dhead   int
	dbytes  int
	dmax    int
}

// bodyData is one shared body as the copies in memory hold it: its bytes,
// and, once a copy of it was decoded, the decoded message, which the
// other copies' decodes copy rather than decode the bytes again. The
// message is never handed out itself: each Delivery.Message gets a copy
// whose Properties and Body are its own (message.Clone).
type bodyData struct {
	id   int64
	data []byte
	msg  atomic.Pointer[message.Message]
	// decoding is set by the copy that decodes the body for msg: once
	// per body.
	decoding atomic.Bool
	// Under the cache's lock: cached says whether the cache keeps it;
	// charge is what it counts for the bytes, dcharge for the decoded
	// message (0 when it is not charged for one).
	cached          bool
	charge, dcharge int
}

// bodyOverhead is what the cache charges for a body beside its bytes: the
// map entry, the order slot and the shared struct.
const bodyOverhead = 96

// decodedOverhead is what the cache charges for a body's decoded message
// beside the body's length: the Message struct with its inline
// properties, and its strings, copied out of the bytes with the body.
const decodedOverhead = 576

func newBodyCache(max int) *bodyCache {
	return &bodyCache{m: map[int64]*bodyData{}, max: max, dmax: max / 2}
}

func (c *bodyCache) get(id int64) (*bodyData, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok
}

// getRun looks up, under one lock, the bodies of the run's copies past
// lastLoaded into dst, at their copies' index.
func (c *bodyCache) getRun(items []runItem, lastLoaded int64, dst []*bodyData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range items {
		if it.id <= lastLoaded {
			continue
		}
		if b, ok := c.m[it.body]; ok {
			dst[i] = b
		}
	}
}

// lacking returns how many of the run's copies past lastLoaded have no
// body in dst, and the least and the greatest of those bodies' ids.
func lacking(items []runItem, lastLoaded int64, dst []*bodyData) (n int, lo, hi int64) {
	for i, it := range items {
		if it.id <= lastLoaded || dst[i] != nil {
			continue
		}
		if n == 0 || it.body < lo {
			lo = it.body
		}
		hi = max(hi, it.body)
		n++
	}
	return n, lo, hi
}

// add keeps b, body b.id; b.data must not change afterwards.
func (c *bodyCache) add(b *bodyData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := b.id
	if _, ok := c.m[id]; ok || len(b.data)+bodyOverhead > c.max {
		return
	}
	b.charge = len(b.data) + bodyOverhead
	c.m[id] = b
	b.cached = true
	c.order = append(c.order, id)
	c.bytes += b.charge
	for c.bytes > c.max && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if b, ok := c.m[old]; ok {
			c.removeLocked(b)
		}
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	if b.msg.Load() != nil {
		c.chargeDecodedLocked(b)
	}
}

// decodedBy charges b for its decoded message, which it now holds, if the
// cache keeps it. A message past the decoded budget may be dropped at
// once, b's or an older one.
func (c *bodyCache) decodedBy(b *bodyData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.cached {
		c.chargeDecodedLocked(b)
	}
}

func (c *bodyCache) chargeDecodedLocked(b *bodyData) {
	if b.dcharge > 0 {
		return
	}
	b.dcharge = len(b.data) + decodedOverhead
	c.dbytes += b.dcharge
	c.decoded = append(c.decoded, b.id)
	for c.dbytes > c.dmax && c.dhead < len(c.decoded) {
		old := c.decoded[c.dhead]
		c.dhead++
		if b, ok := c.m[old]; ok && b.dcharge > 0 {
			// A copy that has it already keeps it; the others decode
			// their own (see Delivery.shared).
			b.msg.Store(nil)
			c.dbytes -= b.dcharge
			b.dcharge = 0
		}
	}
	if c.dhead > len(c.decoded)/2 {
		c.decoded = append(c.decoded[:0], c.decoded[c.dhead:]...)
		c.dhead = 0
	}
}

// removeLocked forgets b. Its decoded message, if any, stays with it for
// the copies in memory that hold it, which the prefetch budgets bound.
func (c *bodyCache) removeLocked(b *bodyData) {
	delete(c.m, b.id)
	b.cached = false
	c.bytes -= b.charge
	c.dbytes -= b.dcharge
	b.dcharge = 0
}

// drop forgets the bodies freed by a commit.
func (c *bodyCache) drop(ids []int64) {
	if len(ids) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if b, ok := c.m[id]; ok {
			c.removeLocked(b)
		}
	}
}
