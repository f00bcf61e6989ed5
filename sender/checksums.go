package sender

import (
	"context"
	"errors"
	"sync"

	"github.com/petrelmq/petrel/message"
)

// Checksums is where the origin's Send hands a file's SHA-256 to the
// sender that already moves the file: Send stores a file message whose
// checksum follows (FileChecksum empty), so that its transfer starts at
// once, then hashes the file. The file worker waits here for that hash
// after the last chunk, and sends it to the next hop; or, when Send's hash
// failed, gives the file up without it ever being delivered.
//
// It lives in memory. A worker that finds no entry (the node restarted
// since Send) hashes the file itself, unless the node recorded that Send's
// hash failed and gave the entry back at its start (GivenUp). Entries are
// removed when the worker settles the file message; Forgotten first learns
// of those whose hash failed, so that the node drops its record;
// one whose message never reaches a worker (it expired, or its queue was
// dropped) stays until the node stops, a few dozen bytes, unless an
// operator's purge removed it (Drop).
//
// A nil *Checksums has no entries.
type Checksums struct {
	mu sync.Mutex
	m  map[earlyKey]*pendingSum

	// Forgotten, if set, is called once the file message of an entry
	// whose hash failed is settled (given up), after that is committed.
	// Set it before the registry is used.
	Forgotten func(origin message.NodeID, id uint64)
}

// pendingSum is one file's hash in progress: done is closed once sum or
// err is set.
type pendingSum struct {
	done chan struct{}
	sum  string
	err  error
}

// ErrNotHashed is the outcome a Send hands Begin's function when it
// stopped hashing with no verdict on the file (its caller's context ended,
// and the caller sends the file again after a restart): the worker hashes
// the file itself, as when no Send registered it.
var ErrNotHashed = errors.New("the file was not hashed; its sender hashes it")

// withdrawn reports whether the Send gave its hash back to the worker.
func (p *pendingSum) withdrawn() bool { return errors.Is(p.err, ErrNotHashed) }

// NewChecksums returns an empty registry.
func NewChecksums() *Checksums { return &Checksums{m: map[earlyKey]*pendingSum{}} }

// Begin registers the hash of the file message (origin, id), before the
// message is stored so that no worker misses it, and returns the function
// that records its outcome: the checksum (lowercase hex), or why there is
// none. That function must be called once; later calls do nothing.
func (c *Checksums) Begin(origin message.NodeID, id uint64) func(sum string, err error) {
	p := &pendingSum{done: make(chan struct{})}
	c.mu.Lock()
	c.m[earlyKey{origin, id}] = p
	c.mu.Unlock()
	var once sync.Once
	return func(sum string, err error) {
		once.Do(func() {
			p.sum, p.err = sum, err
			close(p.done)
		})
	}
}

// GivenUp registers the hash of the file message (origin, id) as failed
// with err: a node that recorded Send's failure gives it back at its start,
// so that the file stays undelivered across the restart.
func (c *Checksums) GivenUp(origin message.NodeID, id uint64, err error) {
	p := &pendingSum{done: make(chan struct{}), err: err}
	close(p.done)
	c.mu.Lock()
	c.m[earlyKey{origin, id}] = p
	c.mu.Unlock()
}

// Drop removes the entry of (origin, id) whose message was never stored,
// or was purged: no worker will settle it.
func (c *Checksums) Drop(origin message.NodeID, id uint64) {
	c.mu.Lock()
	delete(c.m, earlyKey{origin, id})
	c.mu.Unlock()
}

// gaveUp reports whether p holds a failed hash: done, with an error, and
// not given back to the worker.
func (p *pendingSum) gaveUp() bool {
	select {
	case <-p.done:
		return p.err != nil && !p.withdrawn()
	default:
		return false
	}
}

// GivenUpCount returns how many entries hold a failed hash. An operator's
// purge of a send queue looks for their messages only when there are any
// (see the node's Purge).
func (c *Checksums) GivenUpCount() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.m {
		if p.gaveUp() {
			n++
		}
	}
	return n
}

// IsGivenUp reports whether the entry of (origin, id) holds a failed hash.
func (c *Checksums) IsGivenUp(origin message.NodeID, id uint64) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	p := c.m[earlyKey{origin, id}]
	c.mu.Unlock()
	return p != nil && p.gaveUp()
}

// lookup returns the entry of (origin, id), nil if there is none.
func (c *Checksums) lookup(m *message.Message) *pendingSum {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[earlyKey{m.Origin, m.ID}]
}

// failed returns why the hash of m failed, if it is known to have.
func (c *Checksums) failed(m *message.Message) error {
	p := c.lookup(m)
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		if p.withdrawn() {
			return nil
		}
		return p.err
	default:
		return nil
	}
}

// wait returns m's checksum once Send has it, or why it has none. ok is
// false when no Send registered m's hash: the worker hashes it itself.
func (c *Checksums) wait(ctx context.Context, m *message.Message) (sum string, ok bool, err error) {
	p := c.lookup(m)
	if p == nil {
		return "", false, nil
	}
	select {
	case <-p.done:
		if p.withdrawn() {
			return "", false, nil
		}
		return p.sum, true, p.err
	case <-ctx.Done():
		return "", true, context.Cause(ctx)
	}
}

// forget drops m's entry once its file message is settled.
func (c *Checksums) forget(m *message.Message) {
	if c == nil {
		return
	}
	k := earlyKey{m.Origin, m.ID}
	c.mu.Lock()
	p := c.m[k]
	c.mu.Unlock()
	if p == nil {
		return
	}
	// Before the entry goes: once it is gone, so is the node's record.
	if p.gaveUp() && c.Forgotten != nil {
		c.Forgotten(m.Origin, m.ID)
	}
	c.mu.Lock()
	if c.m[k] == p {
		delete(c.m, k)
	}
	c.mu.Unlock()
}

// Len returns how many entries are held.
func (c *Checksums) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
