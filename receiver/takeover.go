package receiver

import (
	"context"
	"sync"
)

// holders records which session holds each transfer's partial file open,
// and how to end it.
//
// A sender opens a new file session for a transfer only once it gave the
// previous one up: its link was cut, or the session failed. This side may
// not know yet, since a half-open connection is noticed only at the idle
// timeout, and meanwhile the old session holds the spool's one Incoming
// for the transfer, so that the resume would fail with ErrBusy until then.
// A newer session for the same transfer from the same peer therefore takes
// over: the older one is cancelled, keeps what it made durable, and
// releases the file. A session of another peer never ends one.
type holders struct {
	mu sync.Mutex
	m  map[string]*holder
}

type holder struct {
	peer   string
	cancel context.CancelFunc
	done   chan struct{}
}

// hold records that the session of peer, which cancel ends, holds the
// transfer id; release, called once it let the file go, forgets it.
func (h *holders) hold(id, peer string, cancel context.CancelFunc) (release func()) {
	hd := &holder{peer: peer, cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	if h.m == nil {
		h.m = map[string]*holder{}
	}
	h.m[id] = hd
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		if h.m[id] == hd {
			delete(h.m, id)
		}
		h.mu.Unlock()
		close(hd.done)
	}
}

// takeOver ends the session of peer that holds id, if there is one, and
// waits until it released the file or ctx ends. It reports whether the
// file was released.
func (h *holders) takeOver(ctx context.Context, id, peer string) bool {
	h.mu.Lock()
	hd := h.m[id]
	h.mu.Unlock()
	if hd == nil || hd.peer != peer {
		return false
	}
	hd.cancel()
	select {
	case <-hd.done:
		return true
	case <-ctx.Done():
		return false
	}
}
