package petrel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// ErrRefused is returned by a remote client's Send when the node refused
// the message for good (an address it does not receive, no route, an
// invalid message), and by Client.Consumer when it refused the
// subscription; the error says why. A refusal by the node's access rules
// wraps ErrDenied instead.
var ErrRefused = errors.New("refused by the node")

// Endpoint is what an application produces and consumes through: a *Node
// it embeds (Open), or a *Client of a node in another process (Dial). The
// producers and consumers of both have the same methods and guarantees,
// so switching between them is one line.
type Endpoint interface {
	Producer() *Producer
	Consumer(addr string) (*Consumer, error)
	// Subscribe makes or joins a subscription to topics; see
	// Node.Subscribe and Client.Subscribe.
	Subscribe(ctx context.Context, pattern string, opts SubscribeOptions) (*Consumer, error)
	Close() error
}

var (
	_ Endpoint = (*Node)(nil)
	_ Endpoint = (*Client)(nil)
)

// DialOptions configure a Client. Zero fields take their defaults.
type DialOptions struct {
	// Name is the client's name: the identity the node's access rules know
	// it by (default "client").
	Name string
	// ID is the client's unique id, the origin of the messages it makes
	// (dedupe keys on origin and id). Zero means a random id for each
	// Dial. A fixed id is only safe if ids from before a restart cannot be
	// issued again: they follow the clock, which must not step back.
	ID message.NodeID
	// Secret is the client's own secret, from its entry in the node's
	// Config.Peers (kind client), or the node's shared secret
	// (Config.Secret) if the node lists no peers; "" if it has none. The
	// client proves it knows it, and checks the node does too.
	Secret string
	// TLS configures tls:// URLs: the roots that verify the node's
	// certificate and, if the node asks for one, the client's. The server
	// name defaults to the URL's host. Nil means the system roots.
	TLS *tls.Config
	// Window is the most publishes in flight, sent and not yet durable
	// (default DefaultClientWindow), and WindowBytes the most bytes of
	// encoded messages they may hold (default DefaultClientWindowBytes);
	// SendAsync blocks while either is reached (a message larger than
	// WindowBytes goes alone). The node grants a publish session at most
	// the greater of its link.window and DefaultClientWindow.
	Window      int
	WindowBytes int64
	// ConsumerWindow is the most deliveries each Consumer has on their way
	// or buffered, ahead of the application (default 1000): the
	// subscription's credit. Those messages are leased to this client.
	// They are taken in the order the node pushed them, so a message of a
	// higher priority sent after the window filled waits behind up to
	// ConsumerWindow of them (a local consumer takes it next): where
	// priority matters more than throughput, set a small window, such as
	// 10.
	ConsumerWindow int
	// Limits bound the messages this client makes and receives; the node
	// applies its own.
	Limits message.Limits
	// HandshakeTimeout bounds the connection handshake and each session's
	// opening and closing (default 10s). IdleTimeout drops a node silent
	// for that long (default 30s); it must match the node's link settings.
	HandshakeTimeout, IdleTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// reconnect after the connection is lost (default 100ms and 2s).
	ReconnectMin, ReconnectMax time.Duration
	// Logger receives the client's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// The defaults of DialOptions.Window and WindowBytes: with 128-byte
// messages the count bounds the flight, with 1 KiB ones the bytes do.
// Enough in flight to fill the node's group commits, whose fsync is the
// same whatever they carry; bounded in bytes, so that large messages do not
// make a client hold thousands of them.
const (
	DefaultClientWindow            = 8192
	DefaultClientWindowBytes int64 = 4 << 20
)

func (o DialOptions) withDefaults() (DialOptions, error) {
	if o.Name == "" {
		o.Name = "client"
	}
	if err := message.ValidName(o.Name); err != nil {
		// The name is the identity the client proves, not an address:
		// the rule's words, without the sentinel of bad destinations.
		why := strings.TrimSuffix(err.Error(), ": "+message.ErrDestination.Error())
		return o, fmt.Errorf("DialOptions.Name is the client's identity, and %s", why)
	}
	if o.ID.IsZero() {
		id, err := message.NewNodeID()
		if err != nil {
			return o, err
		}
		o.ID = id
	}
	if o.Window <= 0 {
		o.Window = DefaultClientWindow
	}
	if o.WindowBytes <= 0 {
		o.WindowBytes = DefaultClientWindowBytes
	}
	if o.ConsumerWindow <= 0 {
		o.ConsumerWindow = 1000
	}
	o.Window = min(o.Window, session.MaxWindow)
	o.ConsumerWindow = min(o.ConsumerWindow, session.MaxWindow)
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = session.DefaultHandshakeTimeout
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 100 * time.Millisecond
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(2*time.Second, o.ReconnectMin)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Client is a connection to a node in another process, through which this
// process produces and consumes as if it embedded the node: Producer and
// Consumer return the same types as Node's, with the same methods and
// guarantees. A Send returns once the message is durable at the node;
// deliveries are leased to the client, and settled at the node when the
// application acks or nacks them.
//
// The client keeps one connection to the node and reconnects when it is
// lost: publishes in flight are sent again (the node's dedupe stores them
// once), and consumers subscribe again. Deliveries held when the
// connection was lost went back to the node's queue; acking them returns
// ErrLeaseLost.
//
// A Client is safe for concurrent use. Close stops it and every goroutine
// it started.
type Client struct {
	opts  DialOptions
	conns address.Connectors
	sc    session.Config
	log   *slog.Logger
	pub   *publisher

	ctx    context.Context // ends when Close begins
	cancel context.CancelFunc
	wg     sync.WaitGroup // connLoop, extraLoops, flushLoop, placeLoop
	flush  chan struct{}  // capacity 1: a consumer has acks to send
	place  chan struct{}  // capacity 1: a consumer found no connection (placeLoop)

	extraMu sync.Mutex // one dial of a connection past the first at a time (openExtra)

	mu        sync.Mutex
	conn      *session.Conn   // nil while the connection is down
	extras    []*session.Conn // connections past the first, for consumers past its sessions
	node      session.Peer    // the node, as of the last connection
	subs      map[*subscription]struct{}
	listeners map[*Listener]struct{}
	closed    bool
	closeOnce sync.Once
}

// Dial connects to the node at url and returns a Client once the
// connection is authenticated. url is a connector: tcp://host:port,
// tls://host:port (with opts.TLS), or a list that is tried in order,
// static:(tcp://a:7400,tcp://b:7400) or failover:(...). A wrong secret or
// a refused certificate fails Dial with the node's reason.
func Dial(ctx context.Context, url string, opts DialOptions) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	conns, err := address.ParseConnectors(url)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c := &Client{
		opts: opts, conns: conns,
		sc: session.Config{
			Name: opts.Name, ID: opts.ID, HandshakeTimeout: opts.HandshakeTimeout, IdleTimeout: opts.IdleTimeout,
			Logger: opts.Logger,
		},
		log:       opts.Logger.With(slog.String(logkey.Component, "client"), slog.String("client", opts.Name)),
		flush:     make(chan struct{}, 1),
		place:     make(chan struct{}, 1),
		subs:      map[*subscription]struct{}{},
		listeners: map[*Listener]struct{}{},
	}
	if opts.Secret != "" {
		c.sc.Secret = []byte(opts.Secret)
	}
	c.pub = newPublisher(c)
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.attach(conn); err != nil {
		c.cancel()
		conn.Close()
		c.wg.Wait()
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.wg.Go(func() { c.connLoop(conn) })
	c.wg.Go(c.flushLoop)
	c.wg.Go(c.placeLoop)
	return c, nil
}

// Node returns the node the client is connected to, as it named itself.
func (c *Client) Node() session.Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// Producer returns a producer that sends through the node. Its messages'
// origin is the client's id.
func (c *Client) Producer() *Producer { return &Producer{b: c.pub} }

// Consumer subscribes to the node's receive address addr and returns a
// consumer of it. The node refuses an address it does not receive
// (ErrRefused) or that the access rules keep from this client
// (ErrDenied). From then on the node pushes up to ConsumerWindow messages
// ahead, leased to this consumer until they are settled; Close the
// consumer to give back those it buffers.
func (c *Client) Consumer(addr string) (*Consumer, error) {
	sub := newSubscription(c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.HandshakeTimeout)
	defer cancel()
	if err := sub.start(ctx); err != nil {
		return nil, fmt.Errorf("consumer of %q: %w", addr, err)
	}
	return &Consumer{b: sub, addr: addr}, nil
}

// connect dials the connectors in turn and runs the handshake.
func (c *Client) connect(ctx context.Context) (*session.Conn, error) {
	var errs []error
	for _, cn := range c.conns.List {
		conn, err := c.dialOne(ctx, cn)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", cn, err))
	}
	return nil, errors.Join(errs...)
}

func (c *Client) dialOne(ctx context.Context, cn address.Connector) (*session.Conn, error) {
	d := net.Dialer{Timeout: c.opts.HandshakeTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", cn.Addr)
	if err != nil {
		return nil, err
	}
	if cn.Scheme == address.SchemeTLS {
		if nc, err = c.tlsHandshake(ctx, nc, cn); err != nil {
			return nil, err
		}
	}
	conn, err := session.Client(ctx, nc, c.sc)
	if err != nil {
		if errors.Is(err, session.ErrAuth) {
			err = fmt.Errorf("%w (if the secret was refused, DialOptions.Secret must be the secret of this client's own entry under the node's peers:, or the node's shared secret if it lists no peers)", err)
		}
		return nil, err
	}
	return conn, nil
}

// tlsHandshake runs the client side of TLS over nc, bounded by the
// handshake timeout. It closes nc if that fails.
func (c *Client) tlsHandshake(ctx context.Context, nc net.Conn, cn address.Connector) (net.Conn, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.opts.TLS != nil {
		cfg = c.opts.TLS.Clone()
	}
	if name, ok := cn.Params["server_name"]; ok {
		cfg.ServerName = name
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(cn.Addr)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.HandshakeTimeout)
	defer cancel()
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", cn.Addr, err)
	}
	return tc, nil
}

// attach makes conn the client's connection: it opens the publish session
// (sending again what was in flight) and subscribes every consumer again.
// A consumer the node now refuses fails; an error for the publish session
// fails the connection.
func (c *Client) attach(conn *session.Conn) error {
	if err := c.pub.attach(conn); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.conn, c.node = conn, conn.Peer()
	subs := c.subsLocked()
	c.mu.Unlock()
	c.subscribeOrphans(conn, subs) // those on a connection past the first stay there
	return nil
}

// connLoop waits for the connection to die, then reconnects with a
// backoff, until Close.
func (c *Client) connLoop(conn *session.Conn) {
	for {
		select {
		case <-conn.Done():
		case <-c.ctx.Done():
			return
		}
		c.detach(conn)
		c.log.Warn("connection to the node lost; reconnecting", slog.String(logkey.Node, conn.Peer().Name), slog.Any(logkey.Error, conn.Err()))
		var ok bool
		if conn, ok = c.reconnect(); !ok {
			return
		}
		c.log.Info("reconnected to the node", slog.String(logkey.Node, conn.Peer().Name))
	}
}

// detach forgets a dead connection: publishes wait for the next one,
// the sessions of the consumers on it are gone.
func (c *Client) detach(conn *session.Conn) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	subs := c.subsLocked()
	c.mu.Unlock()
	c.pub.detach()
	for _, s := range subs {
		s.detachFrom(conn)
	}
}

// reconnect dials until it succeeds or the client closes.
func (c *Client) reconnect() (*session.Conn, bool) {
	delay := c.opts.ReconnectMin
	for {
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return nil, false
		}
		conn, err := c.connect(c.ctx)
		if err == nil {
			if err = c.attach(conn); err == nil {
				return conn, true
			}
			conn.Close()
		}
		if c.ctx.Err() != nil {
			return nil, false
		}
		c.log.Warn("reconnect failed", slog.Any(logkey.Error, err), slog.Duration("retry_in", delay))
		delay = min(2*delay, c.opts.ReconnectMax)
	}
}

// current returns the live connection, or nil.
func (c *Client) current() *session.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// Close stops the client. It stops the listeners of its consumers (their
// handlers return and settle first), sends the acks not yet sent, gives
// the node back what the consumers buffer, waits up to the handshake
// timeout for the publishes in flight to be durable, and closes the
// connection. Publishes still in flight then fail with ErrClosed: they may
// or may not have been stored. Close returns nil, and may be called more
// than once.
func (c *Client) Close() error {
	c.closeOnce.Do(c.close)
	return nil
}

func (c *Client) close() {
	c.mu.Lock()
	c.closed = true
	ls := make([]*Listener, 0, len(c.listeners))
	for l := range c.listeners {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		l.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.HandshakeTimeout)
	defer cancel()
	c.mu.Lock()
	subs := c.subsLocked()
	c.mu.Unlock()
	for _, s := range subs {
		s.shutdown(ctx)
	}
	c.pub.drain(ctx)
	c.cancel()
	c.pub.fail(fmt.Errorf("client closed before the node confirmed the message: %w", ErrClosed))
	c.mu.Lock()
	conns := append(c.extras, c.conn)
	c.conn, c.extras = nil, nil
	c.mu.Unlock()
	for _, conn := range conns {
		if conn != nil {
			conn.Close()
		}
	}
	c.wg.Wait()
}

// track registers a listener so that Close stops it.
func (c *Client) track(l *Listener) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.listeners[l] = struct{}{}
	return nil
}

func (c *Client) untrack(l *Listener) {
	c.mu.Lock()
	delete(c.listeners, l)
	c.mu.Unlock()
}

func (c *Client) logger() *slog.Logger { return c.log }

// remoteErr adds the package's sentinel to a session's refusal: a denial
// wraps ErrDenied, another refusal ErrRefused.
func remoteErr(err error) error {
	switch {
	case errors.Is(err, session.ErrDenied):
		return fmt.Errorf("%w: %w", ErrDenied, err)
	case errors.Is(err, session.ErrRefused):
		return fmt.Errorf("%w: %w", ErrRefused, err)
	case errors.Is(err, session.ErrLimit):
		// Past the connections a client opens (maxExtraConns), what to do.
		return fmt.Errorf("%w (a client opens up to %d connections of %d sessions each: one session for its producers and one per consumer; Dial another client for more)", err, maxExtraConns+1, session.DefaultMaxSessions)
	}
	return err
}
