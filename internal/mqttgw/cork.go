package mqttgw

import (
	"crypto/tls"
	"net"
	"sync"

	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/petrelmq/petrel/internal/acceptretry"
)

// corkMax is how many bytes a corked connection holds back before it
// writes them anyway: a batch of deliveries or PUBACKs is far smaller, so
// this only bounds what one very large batch can hold in memory.
const corkMax = 64 << 10

// corkKeep is the most buffer a connection keeps between batches.
const corkKeep = 16 << 10

// gateMax is how many bytes a gated connection holds back before a write
// waits for the gate to lift: a gate lasts a commit, and the deliveries a
// pump writes meanwhile would otherwise be held whatever their size (up
// to max_inflight bodies of limits.max_body), where a socket's buffer
// makes the writer wait.
const gateMax = 1 << 20

// corkConn holds back the writes to an MQTT connection while a writer has
// it corked, and sends them in one write when the last cork is taken out.
// mochi writes every packet it is given with a write of its own; in
// `bench mqtt` the syscall per delivery was a fifth of the node's CPU. The
// pump corks the connection around a batch of deliveries ready together,
// and the PUBACK loop around the PUBACKs of one commit. mochi writes under
// its client lock, so the order of the packets is the order of the calls
// to Write, which the buffer keeps.
//
// A write that fails while the buffer is flushed fails the connection:
// every later Write returns its error, and mochi's read side ends the
// client, whose unacknowledged deliveries go back to their subscriptions.
//
// A gate holds back every write until it is lifted: a packet that must
// not go before a commit, and what follows it in order (see
// connState.keep). Past gateMax bytes held, a write waits for it.
type corkConn struct {
	net.Conn

	mu     sync.Mutex
	lifted *sync.Cond // signalled when the last gate lifts; made on first use
	corks  int
	gates  int
	buf    []byte
	err    error

	// pre is the state before the CONNECT (see preConnect), nil for a
	// connection that was never guarded. Only the reading goroutine uses
	// it, and OnConnect, which that goroutine runs.
	pre *preConnect
	// size follows the packets read (see sizeGuard); as pre, the
	// reading goroutine's, but for its claims (see corkConn.Close).
	size *sizeGuard
}

// Read reads through the size guard (see sizeGuard.read), which answers
// an MQTT 5 packet past the Maximum Packet Size and holds back a large
// packet's fixed header until its bytes fit the packets' budget.
func (c *corkConn) Read(b []byte) (int, error) {
	if c.size != nil {
		return c.size.read(c, b)
	}
	return c.readConn(b)
}

// readConn reads through the pre-CONNECT guard, which lets bytes through
// unchanged once the CONNECT's fixed header has passed it.
func (c *corkConn) readConn(b []byte) (int, error) {
	if c.pre != nil {
		return c.pre.read(c.Conn, b)
	}
	return c.Conn.Read(b)
}

// gate holds back every write until the matching ungate; cork until
// the matching uncork, up to corkMax bytes.
func (c *corkConn) gate() { c.hold(&c.gates) }
func (c *corkConn) cork() { c.hold(&c.corks) }

// ungate and uncork take a gate or a cork out, and write what was held
// back once none is left.
func (c *corkConn) ungate() error { return c.release(&c.gates) }
func (c *corkConn) uncork() error { return c.release(&c.corks) }

func (c *corkConn) hold(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

func (c *corkConn) release(n *int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n--
	if c.gates == 0 && c.lifted != nil {
		c.lifted.Broadcast() // a write waiting past gateMax goes on
	}
	if c.corks > 0 || c.gates > 0 || len(c.buf) == 0 {
		return c.err
	}
	return c.flushLocked()
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.gates > 0 && len(c.buf) >= gateMax && c.err == nil {
		if c.lifted == nil {
			c.lifted = sync.NewCond(&c.mu)
		}
		c.lifted.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.corks == 0 && c.gates == 0 && len(c.buf) == 0 {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if c.gates > 0 || c.corks > 0 && len(c.buf) < corkMax {
		return len(p), nil
	}
	return len(p), c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	_, err := c.Conn.Write(c.buf)
	if err != nil {
		c.err = err
	}
	if cap(c.buf) > corkKeep {
		// What a batch grew goes back: an idle connection keeps at
		// most corkKeep, whatever its last batch took.
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// ConnectionState is the TLS state of the connection beneath, for the
// client certificate of OnConnectAuthenticate; zero for plain TCP.
func (c *corkConn) ConnectionState() tls.ConnectionState {
	if tc, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return tc.ConnectionState()
	}
	return tls.ConnectionState{}
}

// corked makes every connection of a listener a corkConn, guarded until
// its CONNECT (see connecting.go), and notes a listener that stops
// serving while the gateway is not closing (see accept.go).
type corked struct {
	listeners.Listener
	g *Gateway
	// accept is the listener's socket, which says why it stopped.
	accept *acceptretry.Listener
}

// corkOf is the corkConn of a client's connection, or nil when it has
// none (a connection mochi made itself).
func corkOf(c net.Conn) *corkConn {
	cc, _ := c.(*corkConn)
	return cc
}
