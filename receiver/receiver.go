package receiver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/acceptretry"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// ErrRefused is wrapped by a Router's refusal of a message or a session.
var ErrRefused = errors.New("refused")

// Router decides where inbound traffic goes. The node implements it.
type Router interface {
	// AcceptSession decides whether peer may open a session for address
	// (a send queue's name, "name@node"). An error refuses it, with the
	// error's text as the reason.
	AcceptSession(peer session.Peer, address string) error
	// Inbound returns the queue a message from peer goes to. An error
	// wrapping ErrRefused refuses the message for good; any other error
	// is transient and ends the session, so the sender retries later.
	Inbound(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, error)
}

// Config configures a Server.
type Config struct {
	// Listen is the TCP address to accept links on.
	Listen string
	// Session configures the wire: identity, secret, limits, timeouts.
	Session session.Config
	// Window is the most Data packets a session may have unacknowledged
	// (default 4096).
	Window uint32
	// Limits bound every inbound message.
	Limits message.Limits
	// TLS, when set, makes the listener speak TLS: every accepted
	// connection's TLS handshake must succeed (bounded by the session's
	// HandshakeTimeout) before the session handshake starts.
	TLS *tls.Config
	// Spool holds the files being received; nil refuses file sessions.
	Spool *filetransfer.Spool
	// FileSyncBytes is how many bytes of a file are appended between two
	// syncs and acks, at most (default DefaultFileSyncBytes). Half the
	// sender's window in chunks is the other bound.
	FileSyncBytes int64
	// MaxHandshakes bounds the connections in their TLS or session
	// handshake at once (default DefaultMaxHandshakes); MaxHandshakesPerIP
	// bounds them per remote IP (default DefaultMaxHandshakesPerIP);
	// MaxConnections bounds every connection open at once, in its
	// handshake or authenticated (default DefaultMaxConnections). A
	// connection past a bound is closed as soon as it is accepted.
	MaxHandshakes, MaxHandshakesPerIP, MaxConnections int
	// MaxSubscriptionHeld bounds the bytes of the messages one client
	// subscription holds leased and not yet settled (default
	// DefaultMaxSubscriptionHeld); MaxHeld bounds them for every client
	// subscription together (default DefaultMaxHeld). At a bound the
	// subscription delivers nothing more until the client settles, or
	// the leases time out in the queue; under it the next message goes
	// whatever its size, so one larger than the bound still goes.
	MaxSubscriptionHeld, MaxHeld int64
	// MaxSessionsPerIdentity bounds the publish and subscribe sessions one
	// client identity holds open at once, across all its connections
	// (default DefaultMaxSessionsPerIdentity); MaxConnectionsPerIdentity
	// bounds its connections (default DefaultMaxConnectionsPerIdentity). A
	// session past its bound is refused with the reason, a connection at
	// its handshake. Node identities and shared-secret members are not
	// bounded by them (see identityCounts).
	MaxSessionsPerIdentity, MaxConnectionsPerIdentity int
	Logger                                            *slog.Logger
}

// Server is the listener side of links.
type Server struct {
	cfg    Config
	log    *slog.Logger
	store  *queue.Store
	router Router
	icpt   Interceptor // nil unless the router intercepts

	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	// drain ends when Stop begins: sessions then stop reading, finish
	// what they took and close in order (see Stop).
	drain    context.Context
	drainNow context.CancelFunc
	wg       sync.WaitGroup

	mu sync.Mutex
	// conns are the connections up, each with its context (see ctxOf).
	conns  map[*session.Conn]context.Context
	proofs map[*session.Conn]proof // what each of conns proved at its handshake
	secret []byte                  // the secret new connections authenticate with
	// subs are the client subscriptions being served, and rejudged
	// counts the calls of Rejudge, which judges them again (rejudge.go).
	subs     map[*subscription]struct{}
	rejudged uint64

	stats     Stats
	transfers transfers
	holders   holders
	forged    *ratelog.Limiter // rate-limits the log of forged origins, per peer
	fullLog   *ratelog.Limiter // rate-limits the log of sessions a full store ended, per peer
	acceptLog ratelog.Limiter  // rate-limits the log of accept errors retried
	limits    *connLimits
	idents    *identityCounts // what each client identity holds open
	// stopped holds why the listener stopped accepting other than by
	// Stop (Err), nil while it serves.
	stopped atomic.Pointer[error]
	held    heldCounts // bytes clients' subscriptions hold leased
}

// Stats count what the server saw since it started.
type Stats struct {
	Connections     atomic.Int64 // accepted TCP connections
	HandshakeFailed atomic.Int64 // connections dropped before or at the handshake (bad frames, wrong secret, timeouts)
	AuthFailed      atomic.Int64 // of those, refused for the secret
	SessionsRefused atomic.Int64 // by the Router, the peer's kind or MaxSessionsPerIdentity; those past MaxSessions are in RefuseStats
	Received        atomic.Int64 // Data packets received
	Stored          atomic.Int64 // of those, stored (not deduped, not refused)
	Deduped         atomic.Int64
	Refused         atomic.Int64 // messages refused for good
	ProtocolErrors  atomic.Int64 // connections or sessions ended by a peer's protocol error
	StoreFull       atomic.Int64 // sessions ended because the store had no room for what they carried
	FilesAnnounced  atomic.Int64 // file sessions that announced a file (attempts, resumes included)
	FilesTaken      atomic.Int64 // files verified, placed and committed here
	FilesRefused    atomic.Int64 // files refused for good
	FilesCorrupt    atomic.Int64 // files whose content failed its checksum
	FileBytes       atomic.Int64 // file content bytes received
	FilesAborted    atomic.Int64 // files their senders gave up part-way
	TLSFailed       atomic.Int64 // of HandshakeFailed, those that failed the TLS handshake
	Denied          atomic.Int64 // clients' subscriptions and publishes the access rules refused
	Delivered       atomic.Int64 // messages pushed to clients' subscriptions, redeliveries included
	ForgedOrigins   atomic.Int64 // messages refused for an origin their peer may not speak for
	KindRefused     atomic.Int64 // of SessionsRefused, link or file sessions a client identity tried to open
	// FilesOutsideSession counts the file messages refused because they
	// came in an ordinary session, not as a file session's announcement.
	FilesOutsideSession atomic.Int64
	// AcceptErrors counts the accept errors that pass (out of file
	// descriptors and the like), each retried after a wait.
	AcceptErrors atomic.Int64
}

// New makes a server; Start opens its listener.
func New(cfg Config, store *queue.Store, router Router) *Server {
	if cfg.Window == 0 {
		cfg.Window = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Session.Logger == nil {
		cfg.Session.Logger = cfg.Logger
	}
	if cfg.Session.BufferStats == nil {
		cfg.Session.BufferStats = &session.BufferStats{}
	}
	if cfg.Session.RefuseStats == nil {
		cfg.Session.RefuseStats = &session.RefuseStats{}
	}
	return &Server{
		cfg: cfg, store: store, router: router, secret: cfg.Session.Secret, icpt: interceptorOf(router),
		log:     cfg.Logger.With(slog.String(logkey.Component, "receiver")),
		conns:   map[*session.Conn]context.Context{},
		proofs:  map[*session.Conn]proof{},
		subs:    map[*subscription]struct{}{},
		limits:  newConnLimits(cfg),
		idents:  newIdentityCounts(cfg),
		forged:  &ratelog.Limiter{Every: forgedLogEvery},
		fullLog: &ratelog.Limiter{Every: fullLogEvery},
		// One line every 10 s, as the MQTT and admin listeners log theirs.
		acceptLog: ratelog.Limiter{Every: 10 * time.Second},
	}
}

// Start listens and starts accepting. It returns once the listener is
// bound, so Addr is valid.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	s.ln = acceptretry.New(ln, func(err error, wait time.Duration) {
		s.stats.AcceptErrors.Add(1)
		if held, ok := s.acceptLog.Allow(""); ok {
			s.log.Warn("accept failed; retrying", slog.Any(logkey.Error, err),
				slog.Duration("retry_in", wait), slog.Int64("held_back", held))
		}
	})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.drain, s.drainNow = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Info("receiver listening", slog.String("addr", ln.Addr().String()))
	return nil
}

// SetSecret changes the secret that new connections must prove. Links
// already up stay up until the next Rejudge, which closes those that
// proved the old one.
func (s *Server) SetSecret(secret []byte) {
	s.mu.Lock()
	s.secret = secret
	s.mu.Unlock()
}

func (s *Server) sessionConfig() session.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cfg.Session
	c.Secret = s.secret
	return c
}

// Addr returns the address the server listens on, nil before Start.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// StatsRef returns the server's live counters.
func (s *Server) StatsRef() *Stats { return &s.stats }

// DrainTimeout bounds how long Stop waits for sessions to finish in
// order before it closes their connections.
const DrainTimeout = 5 * time.Second

// Stop shuts the server down in order:
//
//  1. it stops accepting: the listener closes, and no connection opens a
//     new session;
//  2. every session stops reading new packets, waits for the commits of
//     what it already took and acks them, a file session checkpoints what
//     it received, and a subscription stops pushing;
//  3. each session is closed with SessionClose ("node shutting down"),
//     which its sender takes as an orderly end; then the connections
//     close.
//
// Whatever is still running after DrainTimeout is cut: its senders resend
// what was not acked, which dedupe absorbs.
func (s *Server) Stop() error {
	if s.ln == nil {
		return nil
	}
	// Drain first, so that the accept loop takes the closed listener for
	// the end it is, not for an accept error to retry.
	s.drainNow()
	err := s.ln.Close()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(DrainTimeout):
		s.log.Warn("sessions still open after the drain timeout; closing their connections", slog.Duration("timeout", DrainTimeout))
	}
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
	s.log.Info("receiver stopped")
	return err
}

// draining reports whether Stop began.
func (s *Server) draining() bool { return s.drain.Err() != nil }

// readCtx is ctx, ended also when Stop begins: what a session reads new
// packets with, while it finishes what it took with ctx.
func (s *Server) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.drain, cancel)
	return rctx, func() {
		stop()
		cancel()
	}
}

// handshakeTimeout is the session configuration's HandshakeTimeout, or
// its default when unset: what an orderly close may wait for its answer.
func (s *Server) handshakeTimeout() time.Duration {
	if t := s.cfg.Session.HandshakeTimeout; t > 0 {
		return t
	}
	return session.DefaultHandshakeTimeout
}

// closeDrained closes sess in order because the node is shutting down.
func (s *Server) closeDrained(sess *session.Session) {
	ctx, cancel := context.WithTimeout(s.ctx, s.handshakeTimeout())
	defer cancel()
	sess.Close(ctx, "node shutting down")
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		// The errors that pass (out of file descriptors and the like) are
		// retried inside Accept, with a wait that doubles up to a second;
		// another error means the socket no longer accepts anything.
		nc, err := s.ln.Accept()
		if err != nil {
			if s.draining() {
				return
			}
			s.log.Error("link listener stopped accepting connections; restart the node to serve it again",
				slog.String("addr", s.ln.Addr().String()), slog.Any(logkey.Error, err))
			why := fmt.Errorf("link listener on %s stopped accepting connections: %w", s.ln.Addr(), err)
			s.stopped.CompareAndSwap(nil, &why)
			return
		}
		s.stats.Connections.Add(1)
		slot, ok := s.admit(nc)
		if !ok {
			continue
		}
		s.wg.Add(1)
		go s.serveConn(nc, slot)
	}
}

// Err returns why the listener stopped accepting connections other than
// by Stop; nil while it serves. The node's /readyz answers 503 with it.
func (s *Server) Err() error {
	if p := s.stopped.Load(); p != nil {
		return *p
	}
	return nil
}
