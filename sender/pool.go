package sender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/session"
)

// ErrUnknownNode is returned when the directory has no connector for a node.
var ErrUnknownNode = errors.New("no connector for node")

// ErrWrongPeer is returned when a connector reached a node other than the
// one it was meant to.
var ErrWrongPeer = errors.New("connector reached the wrong node")

// Pool keeps one connection per neighbour, shared by the senders to it,
// and more when that one's sessions are all taken (see Open).
type Pool struct {
	cfg session.Config
	dir *address.Directory
	log *slog.Logger
	tls *tls.Config // for tls:// connectors; nil: system roots, no client certificate

	// minWait and maxWait bound the wait after a failed dial to a node
	// before the next (Config.ReconnectMin and ReconnectMax).
	minWait, maxWait time.Duration

	mu     sync.Mutex
	conns  map[string]*poolConn
	extra  map[string][]*poolConn // connections past the first, by node
	fails  map[string]int         // failed dials in a row, by node
	closed bool

	// dialLog holds back repeated lines of failed dials, per node.
	dialLog ratelog.Limiter
	// fullLog holds back repeated lines of sessions a node ended for its
	// full store, per node: every send queue toward it tries again after
	// each backoff, for as long as the store stays full.
	fullLog ratelog.Limiter
	// noRouteLog holds back repeated lines of send queues whose node has
	// no route, per node.
	noRouteLog ratelog.Limiter
	// lines bounds the lines of dialLog and noRouteLog, all nodes
	// together: each node's are bounded per node, but discovery can name
	// nodes without end (forged announcements, when they are not
	// signed). Past it, those lines go to debug level.
	lines ratelog.Budget
	// rehopped is closed and replaced at each Rehop, to wake the senders
	// that wait for a route (see noRouteError); under mu.
	rehopped chan struct{}
}

// dialLogEvery is how often the failed dials to one node are logged at
// most.
const dialLogEvery = 30 * time.Second

// linesPerPeriod is how many lines of failed dials and missing routes,
// of every node together, are logged per dialLogEvery at most.
const linesPerPeriod = 20

// dialError is a failed dial to a neighbour. The pool keeps it until
// retryAt and hands it to every sender that asks meanwhile, so that a
// thousand send queues toward a neighbour that is down cost one dial per
// backoff, not a thousand, and the neighbour a thousand refused
// handshakes a second.
type dialError struct {
	node    string
	err     error
	retryAt time.Time // zero: no wait is due (the dial was cancelled)
}

func (e *dialError) Error() string { return e.err.Error() } // it names the node
func (e *dialError) Unwrap() error { return e.err }

// maxExtraConns bounds the connections to one neighbour past the first
// (session.MaxConnsPerPeer in all).
const maxExtraConns = session.MaxConnsPerPeer - 1

// poolConn is a live connection and which connector of its list it used.
type poolConn struct {
	c     *session.Conn
	index int // 0 = main (or first of a static list)
	addr  string
	ready chan struct{} // closed once dialing ended; c nil if it failed
	err   error
	// retryAt is, for a failed dial of a node's first connection, when
	// the next may start (see dialError).
	retryAt time.Time
}

// live reports whether pc's dial ended with a connection that is still up.
func (pc *poolConn) live() bool {
	select {
	case <-pc.ready:
	default:
		return false // being dialed
	}
	if pc.c == nil {
		return false
	}
	select {
	case <-pc.c.Done():
		return false
	default:
		return true
	}
}

// dialing reports whether pc's dial is still under way.
func (pc *poolConn) dialing() bool {
	select {
	case <-pc.ready:
		return false
	default:
		return true
	}
}

// NewPool makes a pool dialing with cfg the nodes dir knows.
func NewPool(cfg session.Config, dir *address.Directory, log *slog.Logger) *Pool {
	return &Pool{
		cfg: cfg, dir: dir, log: log, conns: map[string]*poolConn{}, extra: map[string][]*poolConn{}, fails: map[string]int{},
		minWait: 100 * time.Millisecond, maxWait: time.Second,
		dialLog: ratelog.Limiter{Every: dialLogEvery}, fullLog: ratelog.Limiter{Every: dialLogEvery},
		noRouteLog: ratelog.Limiter{Every: dialLogEvery}, rehopped: make(chan struct{}),
		lines: ratelog.Budget{Lines: linesPerPeriod, Every: dialLogEvery},
	}
}

// routesChanged returns channels closed at the next change of the
// directory and at the next rehop.
func (p *Pool) routesChanged() (dirChanged, rehopped <-chan struct{}) {
	if p.dir != nil {
		dirChanged = p.dir.Changed()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return dirChanged, p.rehopped
}

// rehop wakes the senders that wait for a route.
func (p *Pool) rehop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.rehopped)
	p.rehopped = make(chan struct{})
}

// withBackoff sets the bounds of the wait after failed dials to a node.
func (p *Pool) withBackoff(min, max time.Duration) *Pool {
	p.minWait, p.maxWait = min, max
	return p
}

// withTLS sets the configuration tls:// connectors dial with.
func (p *Pool) withTLS(c *tls.Config) *Pool {
	p.tls = c
	return p
}

// Get returns the live connection to node, dialing it if there is none.
// Concurrent callers for one node share one dial.
func (p *Pool) Get(ctx context.Context, node string) (*session.Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, session.ErrClosed
	}
	pc := p.conns[node]
	switch {
	case pc == nil, pc.dialing(): // none, or one to wait for below
	case pc.live():
		p.mu.Unlock()
		return pc.c, nil
	case pc.c == nil && time.Now().Before(pc.retryAt):
		p.mu.Unlock()
		return nil, pc.err // failed a moment ago: its backoff is not over
	default:
		pc = nil // failed or dead: dial again
	}
	if pc == nil {
		pc = &poolConn{ready: make(chan struct{})}
		p.conns[node] = pc
		p.mu.Unlock()
		p.dialMain(ctx, node, pc)
	} else {
		p.mu.Unlock()
	}
	select {
	case <-pc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if pc.c == nil {
		return nil, pc.err
	}
	return pc.c, nil
}

// Open opens a session to node with open, on the connection Get returns,
// or, when that one has as many sessions as a connection may carry
// (session.ErrLimit), on another connection to node, dialed when none
// has room. A node with more send queues toward one neighbour than one
// connection carries (session.DefaultMaxSessions) would otherwise leave
// those past it backing off for as long as the others stay open.
func (p *Pool) Open(ctx context.Context, node string, open func(*session.Conn) (*session.Session, error)) (*session.Conn, *session.Session, error) {
	c, err := p.Get(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	sess, err := open(c)
	if !errors.Is(err, session.ErrLimit) {
		return c, sess, err
	}
	for {
		extra, err := p.extraConns(node)
		if err != nil {
			return nil, nil, err
		}
		for _, pc := range extra {
			sess, err := open(pc.c)
			if !errors.Is(err, session.ErrLimit) {
				return pc.c, sess, err
			}
		}
		dialing, mine := p.dialExtra(node)
		if dialing == nil {
			return nil, nil, fmt.Errorf("%d connections to %s, each with as many sessions as it may carry: %w", len(extra)+1, node, session.ErrLimit)
		}
		if mine {
			p.log.Info("connection full of sessions: dialing another", slog.String(logkey.Node, node), slog.Int("connections", len(extra)+2))
			p.dial(ctx, node, dialing)
		}
		select {
		case <-dialing.ready:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if dialing.c == nil {
			return nil, nil, dialing.err
		}
	}
}

// extraConns returns node's live connections past the first, and drops
// the dead ones.
func (p *Pool) extraConns(node string) ([]*poolConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, session.ErrClosed
	}
	var live []*poolConn
	kept := p.extra[node][:0]
	for _, pc := range p.extra[node] {
		switch {
		case pc.live():
			live = append(live, pc)
		case !pc.dialing():
			continue // failed or dead: dropped
		}
		kept = append(kept, pc)
	}
	p.extra[node] = kept
	return live, nil
}

// dialExtra returns the connection to node being dialed past the first,
// if any; if none is, and the bound is not reached, it makes one, which
// the caller dials (mine). Concurrent callers for one node share a dial,
// so that a thousand send queues past a full connection make one more,
// not a thousand. It returns nil at the bound.
func (p *Pool) dialExtra(node string) (dialing *poolConn, mine bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.extra[node] {
		if pc.dialing() {
			return pc, false
		}
	}
	if p.closed || len(p.extra[node]) >= maxExtraConns {
		return nil, false
	}
	pc := &poolConn{ready: make(chan struct{})}
	p.extra[node] = append(p.extra[node], pc)
	return pc, true
}

// dialMain dials node's first connection into pc, and closes pc.ready.
// A failure is kept until its backoff ends (see dialError), counted, and
// logged once per dialLogEvery per node; the senders that get it log it
// only at debug level.
func (p *Pool) dialMain(ctx context.Context, node string, pc *poolConn) {
	defer close(pc.ready)
	p.dialInto(ctx, node, pc)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.c != nil {
		if n := p.fails[node]; n > 0 {
			p.log.Info("dial succeeded after failures", slog.String(logkey.Node, node), slog.Int("failures", n))
		}
		delete(p.fails, node)
		return
	}
	de := &dialError{node: node, err: pc.err}
	pc.err = de
	if ctx.Err() != nil || errors.Is(pc.err, session.ErrClosed) {
		return // not the node's failure: no backoff for the others
	}
	p.fails[node]++
	n := p.fails[node]
	wait := p.minWait
	for i := 1; i < n && wait < p.maxWait; i++ {
		wait *= 2
	}
	wait = min(wait, p.maxWait)
	// Jitter, so that nodes cut from a neighbour at the same moment do
	// not all come back at the same moment.
	wait = wait/2 + rand.N(wait/2+1)
	de.retryAt = time.Now().Add(wait)
	pc.retryAt = de.retryAt
	attrs := []any{slog.String(logkey.Node, node), slog.Int("failures", n), slog.Duration("wait", wait), slog.Any(logkey.Error, de.err)}
	if held, ok := p.dialLog.Allow(node); ok {
		if others, ok := p.lines.Allow(); ok {
			p.log.Warn("dial failed; its send queues back off (logged once per 30s per node, 20 lines per 30s in all)",
				append(attrs, slog.Int64("suppressed", held), slog.Int64("suppressed_all_nodes", others))...)
			return
		}
	}
	p.log.Debug("dial failed; its send queues back off", attrs...)
}

// dial dials node into pc, and closes pc.ready.
func (p *Pool) dial(ctx context.Context, node string, pc *poolConn) {
	defer close(pc.ready)
	p.dialInto(ctx, node, pc)
}

// dialInto tries node's connectors in order: main, then backup; or each of
// a static list. It fills pc.
func (p *Pool) dialInto(ctx context.Context, node string, pc *poolConn) {
	e, ok := p.dir.Lookup(node)
	if !ok {
		pc.err = fmt.Errorf("dial %s: %w", node, ErrUnknownNode)
		return
	}
	var errs []error
	for i, cn := range e.Connectors.List {
		c, err := p.dialOne(ctx, node, cn)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cn, err))
			continue
		}
		pc.c, pc.index, pc.addr = c, i, cn.Addr
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			c.Close()
			pc.c, pc.err = nil, session.ErrClosed
		}
		return
	}
	pc.err = fmt.Errorf("dial %s: %w", node, errors.Join(errs...))
}

// SetSecret changes the secret that new connections authenticate with.
// Connections already up stay up.
func (p *Pool) SetSecret(secret []byte) {
	p.mu.Lock()
	p.cfg.Secret = secret
	// A dial that failed with the old secret may work with the new one:
	// the next Get dials at once.
	for node, pc := range p.conns {
		if !pc.dialing() && pc.c == nil {
			delete(p.conns, node)
		}
	}
	clear(p.fails)
	p.mu.Unlock()
}

func (p *Pool) dialOne(ctx context.Context, node string, cn address.Connector) (*session.Conn, error) {
	var tc *tls.Config
	switch cn.Scheme {
	case address.SchemeTCP:
	case address.SchemeTLS:
		var err error
		if tc, err = p.tlsFor(cn); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("scheme %q is not supported (use tcp or tls)", cn.Scheme)
	}
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	timeout := cfg.HandshakeTimeout
	if timeout <= 0 {
		timeout = session.DefaultHandshakeTimeout
	}
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", cn.Addr)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		if nc, err = tlsHandshake(ctx, nc, tc, timeout); err != nil {
			return nil, err
		}
	}
	c, err := session.Client(ctx, nc, cfg)
	if err != nil {
		return nil, err
	}
	if got := c.Peer().Name; got != node {
		c.Close()
		return nil, fmt.Errorf("%w: wanted %q, reached %q", ErrWrongPeer, node, got)
	}
	return c, nil
}

// OnBackup reports whether the connection to node uses a connector other
// than its first (the failover backup).
func (p *Pool) OnBackup(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.conns[node]
	if pc == nil {
		return false
	}
	select {
	case <-pc.ready:
		return pc.c != nil && pc.index > 0
	default:
		return false
	}
}

// TryMain dials node's main connector; if it answers, the connection on
// the backup is closed, so that its senders reconnect, to main. This is
// how failover returns to main once main is back.
func (p *Pool) TryMain(ctx context.Context, node string) bool {
	e, ok := p.dir.Lookup(node)
	if !ok || e.Connectors.Mode != address.ModeFailover || !p.OnBackup(node) {
		return false
	}
	c, err := p.dialOne(ctx, node, e.Connectors.List[0])
	if err != nil {
		return false
	}
	p.mu.Lock()
	old := p.conns[node]
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return false
	}
	pc := &poolConn{c: c, index: 0, addr: e.Connectors.List[0].Addr, ready: make(chan struct{})}
	close(pc.ready)
	p.conns[node] = pc
	// The connections past the first that are on a backup go too: their
	// senders come back on main, on the new connection or on more.
	var onBackup []*poolConn
	kept := p.extra[node][:0]
	for _, x := range p.extra[node] {
		if x.live() && x.index > 0 {
			onBackup = append(onBackup, x)
			continue
		}
		kept = append(kept, x)
	}
	p.extra[node] = kept
	p.mu.Unlock()
	if old != nil && old.c != nil {
		old.c.Close()
	}
	for _, x := range onBackup {
		x.c.Close()
	}
	p.log.Info("failover: back on main connector", slog.String(logkey.Node, node), slog.String(logkey.Addr, pc.addr))
	return true
}

// Connections returns how many live connections the pool holds to each
// node it has one to: more than one where one connection's sessions were
// all taken (see Open).
func (p *Pool) Connections() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for node, pc := range p.conns {
		if pc.live() {
			out[node]++
		}
	}
	for node, pcs := range p.extra {
		for _, pc := range pcs {
			if pc.live() {
				out[node]++
			}
		}
	}
	return out
}

// Addr returns the address the connection to node uses, "" if none.
func (p *Pool) Addr(node string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.conns[node]; pc != nil {
		select {
		case <-pc.ready:
			if pc.c != nil {
				return pc.addr
			}
		default:
		}
	}
	return ""
}

// Drop closes the connection to node, if any; the next Get dials again.
// Tests and the demo cut links this way.
func (p *Pool) Drop(node string) {
	p.mu.Lock()
	pcs := append([]*poolConn{p.conns[node]}, p.extra[node]...)
	delete(p.conns, node)
	delete(p.extra, node)
	delete(p.fails, node)
	p.mu.Unlock()
	for _, pc := range pcs {
		if pc != nil {
			<-pc.ready
			if pc.c != nil {
				pc.c.Close()
			}
		}
	}
}

// Close closes every connection; Get fails afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	conns := slices.Collect(maps.Values(p.conns))
	for _, pcs := range p.extra {
		conns = append(conns, pcs...)
	}
	p.conns, p.extra = map[string]*poolConn{}, map[string][]*poolConn{}
	p.mu.Unlock()
	for _, pc := range conns {
		select {
		case <-pc.ready:
			if pc.c != nil {
				pc.c.Close()
			}
		default: // its dial sees closed and closes what it made
		}
	}
}
