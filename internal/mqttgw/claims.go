package mqttgw

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on the packets of connected clients. mochi allocates the whole
// packet a fixed header claims (Client.ReadPacket: make([]byte,
// Remaining)) before it reads the body, and keep-alive 0 sets no read
// deadline: each client could park a partial packet of up to the maximum
// packet size (limits.max_body and then some) for as long as it stayed
// connected, max_clients of them at once. The CONNECT is bounded apart
// (see connecting.go); these start with the packet after it.
const (
	// maxPacketBytes is the most bytes the packets being read may claim
	// together. A packet that would pass it is not handed to mochi (the
	// last byte of its fixed header is held back, so mochi allocates
	// nothing) until others are read whole; a packet claims at least
	// while no other does, whatever its size, so each goes in time.
	maxPacketBytes = 64 << 20
	// smallPacket is the claim below which a packet is not counted:
	// ordinary traffic pays nothing, and max_clients of them hold at most
	// 64 MiB.
	smallPacket = 64 << 10
	// claimWait is the most time a packet waits for room before its
	// connection is closed.
	claimWait = 30 * time.Second
	// claimStall is the most time a counted packet's body may go without
	// a byte once claimed; then its connection is closed.
	claimStall = 30 * time.Second
)

// claimBounds are the bounds in force: the constants above, which tests
// lower (atomics, so the race detector agrees).
var claimBounds struct {
	bytes, small, wait, stall atomic.Int64
}

func init() {
	claimBounds.bytes.Store(maxPacketBytes)
	claimBounds.small.Store(smallPacket)
	claimBounds.wait.Store(int64(claimWait))
	claimBounds.stall.Store(int64(claimStall))
}

// errPacketBudget ends a connection whose packet waited claimWait for
// room in maxPacketBytes.
var errPacketBudget = errors.New("mqtt: packets being read claim too many bytes; waited too long for room")

// packetClaims counts the bytes that packets of connected clients claim
// and have not yet sent whole, for every connection of a gateway.
type packetClaims struct {
	used atomic.Int64
	// refused counts the connections closed past claimWait, stalled those
	// closed past claimStall.
	refused, stalled atomic.Int64

	mu    sync.Mutex
	freed chan struct{} // closed when bytes are given back; made by a waiter
}

// take claims n bytes, waiting for room up to wait (none when 0) or until
// done closes, and reports whether it did. A claim always fits when
// nothing else is claimed.
func (p *packetClaims) take(n int64, wait time.Duration, done <-chan struct{}) bool {
	var expired <-chan time.Time
	for {
		p.mu.Lock()
		if used := p.used.Load(); used == 0 || used+n <= claimBounds.bytes.Load() {
			p.used.Add(n)
			p.mu.Unlock()
			return true
		}
		if wait <= 0 {
			p.mu.Unlock()
			return false
		}
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		p.mu.Unlock()
		if expired == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-freed:
		case <-expired:
			return false
		case <-done:
			return false
		}
	}
}

// give gives n claimed bytes back and wakes the packets waiting for room.
func (p *packetClaims) give(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used.Add(-n)
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
}

// claim is one connection's share of packetClaims: the bytes its packet
// being read claims, and the watch on that packet's body. Its reading
// goroutine claims; Close, from any goroutine, gives back.
type claim struct {
	all     *packetClaims
	held    atomic.Int64 // bytes claimed by the packet being read
	done    chan struct{}
	once    sync.Once
	stallMu sync.Mutex
	stall   *time.Timer // closes the connection when the body stops coming
}

func newClaim(all *packetClaims) *claim {
	return &claim{all: all, done: make(chan struct{})}
}

// take claims the n bytes of a packet whose fixed header c is about to
// hand on; wait as in packetClaims.take. Once claimed, the body must keep
// coming: claimStall without a byte closes conn.
func (c *claim) take(n int64, wait time.Duration, conn *corkConn) (bool, error) {
	if !c.all.take(n, wait, c.done) {
		select {
		case <-c.done:
			return false, errClosedWaiting
		default:
		}
		if wait > 0 {
			c.all.refused.Add(1)
			return false, errPacketBudget
		}
		return false, nil
	}
	c.held.Store(n)
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	d := time.Duration(claimBounds.stall.Load())
	if c.stall == nil {
		c.stall = time.AfterFunc(d, func() { c.stalled(conn) })
	} else {
		c.stall.Reset(d)
	}
	return true, nil
}

// errClosedWaiting ends a read whose connection closed while its packet
// waited for room.
var errClosedWaiting = errors.New("mqtt: connection closed while its packet waited for room")

// progress notes bytes of the claimed packet's body: its stall watch
// starts again.
func (c *claim) progress() {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	if c.stall != nil {
		c.stall.Reset(time.Duration(claimBounds.stall.Load()))
	}
}

// release gives back the packet's claim, once it is read whole or its
// connection ends.
func (c *claim) release() {
	c.stallMu.Lock()
	if c.stall != nil {
		c.stall.Stop()
	}
	c.stallMu.Unlock()
	c.all.give(c.held.Swap(0))
}

// stalled closes conn, whose claimed packet's body stopped coming: mochi's
// read fails, which ends the client. keep-alive 0 sets no deadline, and
// mochi's own covers the whole packet only when there is one.
func (c *claim) stalled(conn *corkConn) {
	if c.held.Load() == 0 {
		return // read whole as the timer fired
	}
	c.all.stalled.Add(1)
	_ = conn.Close()
}

// close ends the claim for good: a wait for room ends, and what is held
// is given back.
func (c *claim) close() {
	c.once.Do(func() { close(c.done) })
	c.release()
}

// Close gives back the claim of the packet being read, and ends a wait
// for room, before it closes the connection.
func (c *corkConn) Close() error {
	if c.size != nil && c.size.claims != nil {
		c.size.claims.close()
	}
	return c.Conn.Close()
}
