package session

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxConnBuffer is the default of Config.MaxConnBuffer.
const DefaultMaxConnBuffer = 64 << 20

// BufferStats count, for every connection that shares them, the bytes of
// Data received and not yet taken by Recv, and how often a read loop
// stopped reading because its connection reached MaxConnBuffer. A node
// gives one to all its connections (Config.BufferStats) to export them.
type BufferStats struct {
	Buffered atomic.Int64  // bytes received and not yet taken, now
	Pauses   atomic.Uint64 // times a read loop waited for room
}

// budget bounds the bytes of Data a server connection holds for its
// sessions' Recv: MaxConnBuffer. When a frame would take the connection
// past it, the read loop stops reading the socket until Recv takes
// frames, so that a receiver slower than its peer (a slow disk) slows the
// peer through TCP instead of growing memory. Only Data is counted: the
// read loop waits on nothing else, so acks, pings, SessionClose and the
// like of other sessions go on flowing as soon as room returns, and a
// session that ends, or that this side closes, gives its bytes back at
// once, so a session nobody reads any more never holds the loop.
//
// A frame is let through when nothing is held, whatever its size, so a
// MaxConnBuffer below MaxFrame cannot wedge a connection.
type budget struct {
	max   int64
	stats *BufferStats

	mu   sync.Mutex
	used int64
	peak int64
	room chan struct{} // non-nil while the read loop waits; closed when bytes are given back

	pauses atomic.Uint64
}

func newBudget(cfg Config) *budget {
	return &budget{max: cfg.MaxConnBuffer, stats: cfg.BufferStats}
}

// acquire takes n bytes, waiting while the connection holds too many,
// until quit is closed (the connection died): then it reports false.
func (b *budget) acquire(n int64, quit <-chan struct{}) bool {
	paused := false
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			if b.stats != nil {
				b.stats.Buffered.Add(n)
			}
			return true
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		if !paused {
			paused = true
			b.pauses.Add(1)
			if b.stats != nil {
				b.stats.Pauses.Add(1)
			}
		}
		select {
		case <-room:
		case <-quit:
			return false
		}
	}
}

// release gives n bytes back and wakes the read loop if it waits.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
	b.mu.Unlock()
	if b.stats != nil {
		b.stats.Buffered.Add(-n)
	}
}

// figures returns the bytes held now, the most ever held, and how often
// the read loop waited.
func (b *budget) figures() (used, peak int64, pauses uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.pauses.Load()
}

// sessionBuffer is a server session's share of its connection's budget:
// the bytes of the Data in its queue for Recv. Guarded by Session.mu.
type sessionBuffer struct {
	budget   *budget
	queued   int64
	released bool // the session ended or is closing: its bytes went back
}

// dataSize is what one Data frame counts against the budget: its payload.
func dataSize(d Data) int64 { return 8 + int64(len(d.Message)) }

// took gives back the bytes of d, which Recv or TryRecv just took.
func (s *Session) took(d Data) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf.budget == nil || s.buf.released {
		return
	}
	n := dataSize(d)
	s.buf.queued -= n
	s.buf.budget.release(n)
}

// releaseBuffered gives back every byte the session holds, and makes the
// Data still queued free: no Recv after the session ended or began to
// close must hold the read loop. s.mu is held.
func (s *Session) releaseBuffered() {
	if s.buf.budget == nil || s.buf.released {
		return
	}
	s.buf.released = true
	s.buf.budget.release(s.buf.queued)
	s.buf.queued = 0
}
