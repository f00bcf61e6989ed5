package mqttgw

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/internal/ratelog"
)

// Bounds on connections that have not yet sent their CONNECT. mochi reads
// the CONNECT with no deadline, allocates the whole packet its fixed header
// claims (up to the largest packet, limits.max_body and then some) before
// reading it, and checks max_clients only once it has it: a peer that
// opens connections and sends nothing, or claims a large CONNECT and
// trickles it, would otherwise hold a goroutine pair and that memory each,
// for ever. A CONNECT is small; only a will's payload makes it large.
const (
	// connectTimeout is the most time a connection has to send its whole
	// CONNECT (and, over TLS, finish its handshake); then it is closed.
	connectTimeout = 10 * time.Second
	// maxConnecting is the most connections awaiting their CONNECT at
	// once, from every address together; past it, a new connection is
	// closed as soon as it is accepted.
	maxConnecting = 256
	// maxConnectingPerAddress is the most of them from one remote
	// address: one host that opens connections and sends nothing would
	// otherwise hold every place and shut out every other client, as the
	// link listener's max_handshakes_per_ip keeps it from doing there. A
	// CONNECT takes milliseconds, so only clients behind one NAT address
	// that connect at the very same moment meet it: those past it are
	// closed, and connect again as after any reset.
	maxConnectingPerAddress = 16
	// maxConnectingBytes is the most bytes that the CONNECT packets being
	// read may claim together; a CONNECT that would pass it closes its
	// connection.
	maxConnectingBytes = 64 << 20
)

// connectBounds are the bounds in force: the constants above, which tests
// lower while connections come and go (atomics, so the race detector
// agrees).
var connectBounds struct {
	timeout, conns, bytes, perAddress atomic.Int64
}

func init() {
	connectBounds.timeout.Store(int64(connectTimeout))
	connectBounds.conns.Store(maxConnecting)
	connectBounds.perAddress.Store(maxConnectingPerAddress)
	connectBounds.bytes.Store(maxConnectingBytes)
}

// errConnectBudget refuses a CONNECT whose claimed size passes the budget.
var errConnectBudget = errors.New("mqtt: connections awaiting CONNECT claim too many bytes")

// connecting counts the connections awaiting their CONNECT, and the bytes
// their CONNECTs claim.
type connecting struct {
	conns, bytes atomic.Int64
	// refused counts connections closed past a bound: maxConnecting,
	// maxConnectingPerAddress, or maxConnectingBytes; timedOut those
	// closed by connectTimeout.
	refusedConns, refusedAddress, refusedBytes, timedOut atomic.Int64
	log                                                  ratelog.Limiter

	// byAddress counts the connections awaiting their CONNECT by remote
	// address, without its port: at most maxConnecting entries, since
	// each has one.
	mu        sync.Mutex
	byAddress map[string]int64
}

// addressOf is the remote address of c that maxConnectingPerAddress
// counts: its host, without the port.
func addressOf(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// preConnect is a connection's state until its CONNECT has been read.
type preConnect struct {
	g       *connecting
	addr    string // the remote address its place counts against
	once    sync.Once
	hdr     []byte // the fixed header read so far, not yet handed on
	pending []byte // header bytes read, to hand to mochi
	claimed int64
	done    bool // the fixed header has been handed on
	over    bool // the CONNECT has been read (connected ran)
}

// take counts a connection from addr among those awaiting their
// CONNECT, and returns why not, counted as refused, when too many already
// do, from every address or from addr: "" when it took a place.
func (g *connecting) take(addr string) string {
	if g.conns.Add(1) > connectBounds.conns.Load() {
		g.conns.Add(-1)
		g.refusedConns.Add(1)
		return "too many connections awaiting CONNECT"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byAddress[addr] >= connectBounds.perAddress.Load() {
		g.conns.Add(-1)
		g.refusedAddress.Add(1)
		return "too many connections awaiting CONNECT from one address"
	}
	if g.byAddress == nil {
		g.byAddress = make(map[string]int64)
	}
	g.byAddress[addr]++
	return ""
}

// release gives back a place that take gave a connection from addr.
func (g *connecting) release(addr string) {
	g.conns.Add(-1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.byAddress[addr] - 1; n > 0 {
		g.byAddress[addr] = n
	} else {
		delete(g.byAddress, addr)
	}
}

// guard counts c, from addr, unless its place was taken at accept
// (taken: the websocket listener's), sets the deadline of its CONNECT and
// returns why not when too many connections await theirs.
func (g *connecting) guard(c *corkConn, addr string, taken bool) string {
	if !taken {
		if why := g.take(addr); why != "" {
			return why
		}
	}
	c.pre = &preConnect{g: g, addr: addr}
	_ = c.SetReadDeadline(time.Now().Add(time.Duration(connectBounds.timeout.Load())))
	return ""
}

// connected ends the pre-CONNECT state: mochi has the CONNECT, sets the
// keepalive's deadline itself (which replaces connectTimeout's), and the
// bytes it claimed are given back. Idempotent; also run when the
// connection ends before its CONNECT.
func (p *preConnect) connected() {
	p.once.Do(func() {
		p.over = true
		p.g.release(p.addr)
		p.g.bytes.Add(-p.claimed)
		p.claimed = 0
	})
}

// read passes the CONNECT's first bytes on once its fixed header is
// whole and the size it claims fits the budget, then everything as it
// comes. It is only called from mochi's reading goroutine, which also
// runs OnConnect and so connected: p needs no lock.
func (p *preConnect) read(conn net.Conn, b []byte) (int, error) {
	if p.over {
		return conn.Read(b)
	}
	if p.done {
		// The CONNECT's body, under the connect timeout still.
		n, err := conn.Read(b)
		p.countTimeout(err)
		return n, err
	}
	if len(p.pending) == 0 {
		if err := p.readHeader(conn); err != nil {
			p.countTimeout(err)
			return 0, err
		}
	}
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	if len(p.pending) == 0 {
		p.done = true
	}
	return n, nil
}

// countTimeout counts err if it is the connect timeout's.
func (p *preConnect) countTimeout(err error) {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		p.g.timedOut.Add(1)
	}
}

// readHeader reads the fixed header (a byte of type and flags, then the
// remaining length in up to four bytes), decoded with mochi's own
// decoders, and claims the remaining length from the budget.
func (p *preConnect) readHeader(conn net.Conn) error {
	var one [1]byte
	for {
		if _, err := conn.Read(one[:]); err != nil {
			return err
		}
		p.hdr = append(p.hdr, one[0])
		if len(p.hdr) >= 2 && one[0]&0x80 == 0 || len(p.hdr) == 5 {
			break
		}
	}
	var fh packets.FixedHeader
	if err := fh.Decode(p.hdr[0]); err != nil {
		return err
	}
	remaining, _, err := packets.DecodeLength(bytes.NewReader(p.hdr[1:]))
	if err != nil {
		return err
	}
	claim := int64(remaining)
	if p.g.bytes.Add(claim) > connectBounds.bytes.Load() {
		p.g.bytes.Add(-claim)
		p.g.refusedBytes.Add(1)
		return fmt.Errorf("%w: %d bytes", errConnectBudget, remaining)
	}
	p.claimed = claim
	p.pending, p.hdr = p.hdr, nil
	return nil
}

// Serve guards every connection of the listener until its CONNECT. A
// websocket connection took its place among those awaiting their
// CONNECT at accept, before its upgrade, and hands it over here. Serve
// returns when the listener stops serving: when it is closed, or when
// its socket failed past retrying, which Serve notes.
func (l corked) Serve(establish listeners.EstablishFn) {
	l.Listener.Serve(func(id string, c net.Conn) error {
		cc := &corkConn{Conn: c, size: &sizeGuard{max: l.g.srv.Options.Capabilities.MaximumPacketSize, claims: newClaim(&l.g.claims)}}
		taken := false
		addr := addressOf(c)
		if h, ok := c.(interface{ handOver() (string, bool) }); ok {
			if a, ok := h.handOver(); ok {
				taken, addr = true, a
			}
		}
		// Nothing is returned to mochi's listener, which logs whatever
		// establish returns at WARN with no message, once for every
		// connection that ends: 200 idle connections closed made 200
		// lines, past the rate limit of the refusal's own. The refusal
		// is logged above, a client's end by mochi at debug, and a
		// connection that ended before its CONNECT here, at debug too.
		if why := l.g.connecting.guard(cc, addr, taken); why != "" {
			l.g.refuseConnecting(c, why)
			return nil
		}
		defer cc.pre.connected()
		if err := establish(id, cc); err != nil {
			l.g.log.Debug("mqtt connection ended", slog.String("remote", c.RemoteAddr().String()), slog.Any("error", err))
		}
		return nil
	})
	if !l.g.closing.Load() {
		l.g.listenerStopped(l.ID(), l.Address(), l.accept.Err())
	}
}

// refuseConnecting closes c, a connection past maxConnecting or
// maxConnectingPerAddress (why), and logs it at most once every
// connectLogEvery for each.
func (g *Gateway) refuseConnecting(c net.Conn, why string) {
	if held, ok := g.connecting.log.Allow(why); ok {
		g.log.Warn("mqtt connection closed: "+why,
			slog.String("remote", c.RemoteAddr().String()), slog.Int64("bound", connectBounds.conns.Load()),
			slog.Int64("bound_per_address", connectBounds.perAddress.Load()), slog.Int64("held_back", held))
	}
	_ = c.Close()
}
