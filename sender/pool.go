package sender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// ErrUnknownNode is returned when the directory has no connector for a node.
var ErrUnknownNode = errors.New("no connector for node")

// ErrWrongPeer is returned when a connector reached a node other than the
// one it was meant to.
var ErrWrongPeer = errors.New("connector reached the wrong node")

// Pool keeps one connection per neighbour, shared by the senders to it.
type Pool struct {
	cfg session.Config
	dir *address.Directory
	log *slog.Logger
	tls *tls.Config // for tls:// connectors; nil: system roots, no client certificate

	mu     sync.Mutex
	conns  map[string]*poolConn
	closed bool
}

// poolConn is a live connection and which connector of its list it used.
type poolConn struct {
	c     *session.Conn
	index int // 0 = main (or first of a static list)
	addr  string
	ready chan struct{} // closed once dialing ended; c nil if it failed
	err   error
}

// NewPool makes a pool dialing with cfg the nodes dir knows.
func NewPool(cfg session.Config, dir *address.Directory, log *slog.Logger) *Pool {
	return &Pool{cfg: cfg, dir: dir, log: log, conns: map[string]*poolConn{}}
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
	if pc != nil {
		select {
		case <-pc.ready:
			if pc.c != nil {
				select {
				case <-pc.c.Done():
					pc = nil // dead: dial again
				default:
					p.mu.Unlock()
					return pc.c, nil
				}
			} else {
				pc = nil
			}
		default: // a dial is under way: wait for it below
		}
	}
	if pc == nil {
		pc = &poolConn{ready: make(chan struct{})}
		p.conns[node] = pc
		p.mu.Unlock()
		p.dial(ctx, node, pc)
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

// dial tries node's connectors in order: main, then backup; or each of a
// static list. It fills pc and closes pc.ready.
func (p *Pool) dial(ctx context.Context, node string, pc *poolConn) {
	defer close(pc.ready)
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
	p.mu.Unlock()
	if old != nil && old.c != nil {
		old.c.Close()
	}
	p.log.Info("failover: back on main connector", slog.String(logkey.Node, node), slog.String(logkey.Addr, pc.addr))
	return true
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
	pc := p.conns[node]
	delete(p.conns, node)
	p.mu.Unlock()
	if pc != nil {
		<-pc.ready
		if pc.c != nil {
			pc.c.Close()
		}
	}
}

// Close closes every connection; Get fails afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[string]*poolConn{}
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
