package session

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// Conn is one authenticated connection between two nodes, carrying many
// sessions. Client and Server make one; it owns two goroutines, readLoop
// and writeLoop, which stop when the connection dies or Close is called.
//
// All methods are safe for concurrent use.
type Conn struct {
	cfg    Config
	log    *slog.Logger
	nc     net.Conn
	client bool // this side ran Client: it opens sessions and sends Data
	peer   Peer

	out     *outbox
	tab     *table
	budget  *budget       // server: bytes of Data waiting for Recv
	accepts chan *Session // server: sessions waiting for Accept

	running atomic.Int32  // loops still running
	done    chan struct{} // closed when both loops have returned

	framesIn, bytesIn atomic.Uint64

	// owned by readLoop
	br   *bufio.Reader
	hdr  [HeaderLen]byte
	rbuf []byte
}

// readBufferSize is the read loop's buffer: one Read from the socket takes
// many small frames at once.
const readBufferSize = 64 << 10

// start makes the Conn for an authenticated nc and starts its loops.
func start(nc net.Conn, cfg Config, peer Peer, client bool) *Conn {
	c := &Conn{
		cfg:    cfg,
		nc:     nc,
		client: client,
		peer:   peer,
		out:    newOutbox(nc, cfg),
		tab:    newTable(cfg.MaxSessions),
		budget: newBudget(cfg),
		done:   make(chan struct{}),
		br:     bufio.NewReaderSize(idleReader{nc: nc, idle: cfg.IdleTimeout}, readBufferSize),
	}
	side := "server"
	if client {
		side = "client"
		c.tab.next = 1
	} else {
		c.accepts = make(chan *Session, cfg.MaxSessions)
	}
	c.log = cfg.Logger.With(slog.String(logkey.Component, "session"), slog.String("side", side),
		slog.String(logkey.Peer, peer.Name), slog.String(logkey.Addr, peer.Addr))
	c.running.Store(2)
	go c.readLoop()
	go c.writeLoop()
	c.log.Debug("connection up")
	return c
}

func (c *Conn) loopDone() {
	if c.running.Add(-1) == 0 {
		c.log.Debug("connection down", slog.Any(logkey.Error, c.out.Err()))
		close(c.done)
	}
}

// Peer returns the node at the other end, as it named itself in the
// handshake.
func (c *Conn) Peer() Peer { return c.peer }

// Done is closed once the connection is dead and its goroutines have
// stopped. Every session of the connection has ended by then.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection died, or nil while it is alive. It is set
// before Done is closed: a *RemoteError if the peer reported an error, an
// error wrapping ErrIdle, ErrWindow, ErrProtocol... if this side gave up, or
// ErrClosed after Close.
func (c *Conn) Err() error { return c.out.Err() }

// Close closes the connection: it tells the peer (a best-effort ErrorPacket
// with CodeShutdown, bounded by one second), closes the socket, ends every
// session with ErrClosed and waits for the connection's goroutines. Sessions
// are not closed one by one first; call Session.Close for an orderly end of
// a session. Close always returns nil and may be called more than once.
func (c *Conn) Close() error {
	c.out.fail(fmt.Errorf("connection to %s closed by %s: %w", c.peer.Name, c.cfg.Name, ErrClosed), true)
	<-c.done
	return nil
}

// Stats returns the connection's counters.
func (c *Conn) Stats() ConnStats {
	used, peak, pauses := c.budget.figures()
	return ConnStats{
		FramesIn:  c.framesIn.Load(),
		BytesIn:   c.bytesIn.Load(),
		FramesOut: c.out.framesOut.Load(),
		BytesOut:  c.out.bytesOut.Load(),
		Sessions:  c.tab.len(),
		Buffered:  used, BufferedPeak: peak, ReadPauses: pauses,
	}
}

// Open opens a session for address on a client connection. It sends
// SessionCreate{Versions: [ProtocolVersion], ...} with window (at least 1)
// and waits for the response, bounded by ctx and HandshakeTimeout. A refusal
// is a *RemoteError wrapping ErrRefused, with the peer's reason; a refusal
// for lack of a common version wraps ErrVersion. The negotiated window is
// Session.Window, at most window (and at most MaxWindow).
func (c *Conn) Open(ctx context.Context, address string, window uint32) (*Session, error) {
	return c.open(ctx, address, window, 0)
}

// OpenFile opens a file session for address: the same as Open, with
// FlagFile on the SessionCreate, so that the server knows the session
// carries a file's announcement and chunks rather than a queue's messages.
// What the Data sequence numbers then mean is for the sender and receiver
// packages; the session passes them through as it does any.
func (c *Conn) OpenFile(ctx context.Context, address string, window uint32) (*Session, error) {
	return c.open(ctx, address, window, FlagFile)
}

func (c *Conn) open(ctx context.Context, address string, window uint32, flags uint8) (*Session, error) {
	return c.openWith(ctx, address, window, flags, nil)
}

// openWith opens a session; topic is the subscription of a FlagTopic one.
func (c *Conn) openWith(ctx context.Context, address string, window uint32, flags uint8, topic *TopicSubscription) (*Session, error) {
	if !c.client {
		return nil, fmt.Errorf("open session for %q: only the client side of a connection opens sessions: %w", address, ErrProtocol)
	}
	if window == 0 {
		return nil, fmt.Errorf("open session for %q: window must be at least 1", address)
	}
	if len(address) > maxStr16 {
		return nil, fmt.Errorf("open session for an address of %d bytes: longer than %d", len(address), maxStr16)
	}
	s := c.newSession(0, address)
	s.state = stateOpening
	s.setKind(flags)
	s.topic = topic
	s.created = make(chan struct{})
	s.reqWindow = min(window, MaxWindow)
	id, err := c.tab.addClient(s)
	if err != nil {
		return nil, fmt.Errorf("open session for %q: %w", address, err)
	}
	req := SessionCreate{Versions: c.offer(), Name: c.cfg.Name, ID: c.cfg.ID, Address: address, Window: s.reqWindow, Topic: topic}
	if err := c.out.control(Header{Type: TypeSessionCreate, Flags: flags, Session: id}, req); err != nil {
		c.tab.remove(id, s)
		return nil, fmt.Errorf("open session for %q: %w", address, err)
	}
	timer := time.NewTimer(c.cfg.HandshakeTimeout)
	defer timer.Stop()
	select {
	case <-s.created:
		c.log.Debug("session opened", slog.Uint64(logkey.Session, uint64(id)), slog.String(logkey.Address, address))
		return s, nil
	case <-s.done:
		select {
		case <-s.created:
			// Accepted, then ended before this select looked: the
			// session is the caller's, with what it received before it
			// ended and the error its calls report.
			return s, nil
		default:
		}
		return nil, fmt.Errorf("open session for %q with %s: %w", address, c.peer.Name, s.Err())
	case <-timer.C:
		err = fmt.Errorf("no response from %s within %v", c.peer.Name, c.cfg.HandshakeTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.abandon(s, err)
	return nil, fmt.Errorf("open session for %q: %w", address, err)
}

// offer returns the versions a client offers, highest first.
func (c *Conn) offer() []uint16 {
	lo, hi := c.cfg.versions[0], c.cfg.versions[1]
	vs := make([]uint16, 0, hi-lo+1)
	for v := hi; v >= lo && v > 0; v-- {
		vs = append(vs, v)
	}
	return vs
}

// abandon gives up on a session whose Open timed out. If the response
// arrived meanwhile, the peer holds the session open, so it is closed
// there; a response that arrives later is answered by the read loop.
func (c *Conn) abandon(s *Session, err error) {
	c.tab.remove(s.id, s)
	s.mu.Lock()
	wasOpen := s.state == stateOpen
	s.mu.Unlock()
	s.end(err, false)
	if wasOpen {
		_ = c.out.control(Header{Type: TypeSessionClose, Session: s.id}, SessionClose{Reason: "open abandoned: " + err.Error()})
	}
}

// Accept waits for the next session a client opens on a server connection.
// The caller then calls s.Accept(window) or s.Refuse(reason); until then
// the client's Open waits (up to its HandshakeTimeout). A SessionCreate
// without a common version, or past MaxSessions, is refused by the package
// itself and never returned here. Accept returns the connection's error
// once it died.
func (c *Conn) Accept(ctx context.Context) (*Session, error) {
	if c.client {
		return nil, fmt.Errorf("accept session: only the server side of a connection accepts sessions: %w", ErrProtocol)
	}
	select {
	case s := <-c.accepts:
		return s, nil
	case <-c.out.quit:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) newSession(id uint32, address string) *Session {
	s := &Session{
		id:      id,
		address: address,
		client:  c.client,
		self:    Peer{Name: c.cfg.Name, ID: c.cfg.ID},
		timeout: c.cfg.HandshakeTimeout,
		out:     c.out,
		tab:     c.tab,
		done:    make(chan struct{}),
	}
	if !c.client {
		s.acks = make(chan Ack) // never sent to; closed when the session ends
		s.buf.budget = c.budget
	}
	return s
}

// idleReader sets the read deadline before every read from the socket, so
// that a peer silent for IdleTimeout fails the read. Reads happen when the
// read loop's buffer runs dry, not once per frame.
type idleReader struct {
	nc   net.Conn
	idle time.Duration
}

func (r idleReader) Read(p []byte) (int, error) {
	if err := r.nc.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
		return 0, err
	}
	return r.nc.Read(p)
}
