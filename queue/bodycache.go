package queue

import "sync"

// bodyCache keeps the bytes of the shared bodies stored last, up to a
// byte budget, so that the subscriptions of a topic that trail its
// publisher refill their copies from memory instead of each reading the
// same body from disk: that read was most of a trailing refill's cost.
// Bodies leave it oldest first (ids only grow) and when they are freed.
type bodyCache struct {
	mu    sync.Mutex
	m     map[int64][]byte
	order []int64 // ids in the order they came in; freed ones are skipped
	head  int
	bytes int
	max   int
}

// bodyOverhead is what the cache charges for a body beside its bytes: the
// map entry and the order slot.
const bodyOverhead = 64

func newBodyCache(max int) *bodyCache {
	return &bodyCache{m: map[int64][]byte{}, max: max}
}

func (c *bodyCache) get(id int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok
}

// add keeps data as body id's bytes; data must not change afterwards.
func (c *bodyCache) add(id int64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; ok || len(data)+bodyOverhead > c.max {
		return
	}
	c.m[id] = data
	c.order = append(c.order, id)
	c.bytes += len(data) + bodyOverhead
	for c.bytes > c.max && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if b, ok := c.m[old]; ok {
			delete(c.m, old)
			c.bytes -= len(b) + bodyOverhead
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
			c.bytes -= len(b) + bodyOverhead
		}
	}
}
