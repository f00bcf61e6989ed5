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
type bodyCache struct {
	mu    sync.Mutex
	m     map[int64]*bodyData
	order []int64 // ids in the order they came in; freed ones are skipped
	head  int
	bytes int
	max   int
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
	// charge is what the cache counts for it, and cached whether the
	// cache keeps it, under the cache's lock.
	charge int
	cached bool
}

// bodyOverhead is what the cache charges for a body beside its bytes: the
// map entry, the order slot and the shared struct.
const bodyOverhead = 96

// decodedOverhead is what the cache charges, beside the bytes once more,
// for a body's decoded message: the Message struct with its inline
// properties, the strings and the body copied out of the bytes.
const decodedOverhead = 576

func newBodyCache(max int) *bodyCache {
	return &bodyCache{m: map[int64]*bodyData{}, max: max}
}

func (c *bodyCache) get(id int64) (*bodyData, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok
}

// getRun looks up, under one lock, the bodies of the run's copies past
// lastLoaded into dst, at their copies' index. It returns how many of
// them it lacks, and the least and the greatest of their ids.
func (c *bodyCache) getRun(items []runItem, lastLoaded int64, dst []*bodyData) (n int, lo, hi int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range items {
		if it.id <= lastLoaded {
			continue
		}
		if b, ok := c.m[it.body]; ok {
			dst[i] = b
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
	id := b.id
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; ok || len(b.data)+bodyOverhead > c.max {
		return
	}
	b.charge = len(b.data) + bodyOverhead
	if b.msg.Load() != nil {
		b.charge += len(b.data) + decodedOverhead
	}
	c.m[id] = b
	b.cached = true
	c.order = append(c.order, id)
	c.bytes += b.charge
	c.evictLocked()
}

// decoded charges b for its decoded message, which it now holds, if the
// cache keeps it.
func (c *bodyCache) decoded(b *bodyData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !b.cached || b.charge > len(b.data)+bodyOverhead {
		return
	}
	extra := len(b.data) + decodedOverhead
	b.charge += extra
	c.bytes += extra
	c.evictLocked()
}

// evictLocked drops the oldest bodies until the cache is within budget.
func (c *bodyCache) evictLocked() {
	for c.bytes > c.max && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if b, ok := c.m[old]; ok {
			delete(c.m, old)
			b.cached = false
			c.bytes -= b.charge
		}
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
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
			delete(c.m, id)
			b.cached = false
			c.bytes -= b.charge
		}
	}
}
