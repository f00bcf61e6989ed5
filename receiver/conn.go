package receiver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// serveConn runs one inbound connection: its handshakes (handshake), then
// its sessions (serveSessions) until the connection dies or the server stops.
func (s *Server) serveConn(nc net.Conn, slot *connSlot) {
	defer s.wg.Done()
	defer slot.release()
	// A connection still in its handshakes has nothing to drain: Stop
	// ends them at once.
	hctx, hcancel := s.readCtx(s.ctx)
	defer hcancel()
	// Read before the handshake looks the identity up: see stillAdmitted.
	gen := s.rejudgeGen()
	c, proved, ok := s.handshake(hctx, nc, slot)
	if !ok {
		return
	}
	// The connection's context ends with the server or the connection;
	// every session of the connection derives its own from it (ctxOf).
	// One goroutine per connection watches it die, rather than one per
	// session: a connection may carry thousands of idle sessions.
	cctx, ccancel := context.WithCancel(s.ctx)
	defer ccancel()
	if !s.track(cctx, c, proved) {
		c.Close()
		return
	}
	defer s.untrack(c)
	if !s.stillAdmitted(c, gen) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-c.Done():
			ccancel()
		case <-cctx.Done():
		}
	}()
	if !s.connected(hctx, c) {
		c.Close()
		return
	}
	defer s.disconnected(c)
	// serveSessions returns once every session of c has ended: the file
	// transfers c paused can only resume on another connection, and are
	// no longer listed.
	defer s.transfers.connClosed(c)
	s.log.Info("link up", slog.String(logkey.Peer, c.Peer().Name), slog.String("addr", nc.RemoteAddr().String()))
	s.serveSessions(c)
}

// handshake runs the TLS handshake, if the listener speaks TLS, then the
// session handshake, which proves the peer's identity. It returns the
// secret the peer proved (see proof). A failure is counted and logged
// (rate-limited), and the connection is closed.
func (s *Server) handshake(ctx context.Context, nc net.Conn, slot *connSlot) (*session.Conn, proof, bool) {
	remote := nc.RemoteAddr().String()
	cfg := s.sessionConfig()
	proved := proof{secret: cfg.Secret}
	if creds := cfg.Credentials; creds != nil {
		// Called once, by the handshake in this goroutine: the secret
		// the peer is held to is the one its credential had then.
		cfg.Credentials = func(name string) (session.Credential, bool) {
			c, ok := creds(name)
			proved = proof{secret: c.Secret, identity: true}
			return c, ok
		}
	}
	if s.cfg.TLS != nil {
		tc, check, cn, err := s.tlsConn(ctx, nc)
		if err != nil {
			s.stats.HandshakeFailed.Add(1)
			s.stats.TLSFailed.Add(1)
			if !s.draining() {
				s.handshakeFailed("link refused at TLS handshake", remote, err)
			}
			return nil, proof{}, false
		}
		nc, cfg.CheckPeer, cfg.Certified = tc, check, cn
	}
	// The bound on a client identity's connections is judged last, once
	// everything else accepted the peer, so that a refused handshake takes
	// no place.
	check := s.checkPeer(cfg.CheckPeer)
	cfg.CheckPeer = func(p session.Peer) error {
		if check != nil {
			if err := check(p); err != nil {
				return err
			}
		}
		// A refusal is counted and logged as a failed handshake, with
		// its reason.
		return s.idents.takeConn(slot, p)
	}
	c, err := session.Server(ctx, nc, cfg)
	slot.handshakeDone()
	if err != nil {
		s.stats.HandshakeFailed.Add(1)
		if errors.Is(err, session.ErrAuth) {
			s.stats.AuthFailed.Add(1)
		}
		if !s.draining() {
			s.handshakeFailed("link refused at handshake", remote, err)
		}
		return nil, proof{}, false
	}
	return c, proved, true
}

// serveSessions takes the sessions the peer opens, one goroutine each, until
// the connection dies or the server stops. No session opens once Stop
// began; the connection closes after its sessions closed in order.
func (s *Server) serveSessions(c *session.Conn) {
	var sessions sync.WaitGroup
	defer sessions.Wait()
	actx, acancel := s.readCtx(s.ctx)
	defer acancel()
	for {
		sess, err := c.Accept(actx)
		if err != nil && s.draining() && s.ctx.Err() == nil {
			sessions.Wait()
			c.Close()
			return
		}
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, session.ErrClosed) {
				if isProtocol(err) {
					s.stats.ProtocolErrors.Add(1)
				}
				s.log.Warn("link down", slog.String(logkey.Peer, c.Peer().Name), slog.Any(logkey.Error, err))
			}
			c.Close()
			return
		}
		s.serveSession(c, sess, &sessions)
	}
}

// serveSession refuses sess, with the reason, or starts what serves it:
// a client's publish or subscribe session, a file session or a link's.
func (s *Server) serveSession(c *session.Conn, sess *session.Session, sessions *sync.WaitGroup) {
	peer := c.Peer()
	refuse := func(err error) {
		s.stats.SessionsRefused.Add(1)
		s.log.Warn("session refused", slog.String(logkey.Peer, peer.Name), slog.String(logkey.Address, sess.Address()), slog.Any(logkey.Error, err))
		sess.Refuse(err.Error())
	}
	if err := sessionAllowed(peer, sess); err != nil {
		s.stats.KindRefused.Add(1)
		refuse(err)
		return
	}
	if sess.Publish() || sess.Subscribe() {
		release, err := s.idents.takeSession(peer)
		if err != nil {
			s.stats.SessionsRefused.Add(1)
			s.identityRefused(peer, err)
			sess.Refuse(err.Error())
			return
		}
		s.serveClient(c, sess, sessions, release)
		return
	}
	if err := s.router.AcceptSession(peer, sess.Address()); err != nil {
		refuse(err)
		return
	}
	if err := sess.Accept(s.cfg.Window); err != nil {
		return
	}
	sessions.Add(1)
	go func() {
		defer sessions.Done()
		if sess.File() {
			s.fileLoop(c, sess)
		} else {
			s.sessionLoop(c, sess)
		}
	}()
}

func isProtocol(err error) bool {
	return errors.Is(err, session.ErrProtocol) || errors.Is(err, session.ErrMalformed) ||
		errors.Is(err, session.ErrUnknownType) || errors.Is(err, session.ErrFrameTooLarge) ||
		errors.Is(err, session.ErrWindow)
}

// track registers c, with its context ctx and what it proved at its
// handshake, so that Stop closes it, ctxOf finds ctx and Rejudge finds
// its proof; false if the server stopped.
func (s *Server) track(ctx context.Context, c *session.Conn, proved proof) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.conns[c] = ctx
	s.proofs[c] = proved
	return true
}

func (s *Server) untrack(c *session.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	delete(s.proofs, c)
	s.mu.Unlock()
}

// Peers returns the peer of each connection up, in no order, one entry
// per connection: a neighbour is among them while its own link to this
// node is connected, which the node takes as a sign that it is reachable
// (see the topic janitor's grace) even when it had nothing to send to it.
func (s *Server) Peers() []session.Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]session.Peer, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c.Peer())
	}
	return out
}

// ctxOf returns a context cancelled when the server stops or c dies: one
// of c's context (see serveConn), which costs no goroutine.
func (s *Server) ctxOf(c *session.Conn) (context.Context, context.CancelFunc) {
	s.mu.Lock()
	parent, ok := s.conns[c]
	s.mu.Unlock()
	if !ok {
		// c is gone already: so is what the session would serve.
		ctx, cancel := context.WithCancel(s.ctx)
		cancel()
		return ctx, cancel
	}
	return context.WithCancel(parent)
}
