package receiver

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// Rejudging: the node's access rules and identities change while
// connections are up. What a connection or a subscription was granted is
// judged when it opens; a change that takes the grant away must not wait
// for the peer to reconnect, or a revoked client would go on receiving for
// as long as its connection lives. So Rejudge, called after each change,
// judges again what is open: a subscription that lost its right is ended
// with the reason (CodeDenied, which the client's consumer returns), and
// a connection whose identity is no longer admitted as it was is closed,
// once its subscriptions were told why. What a revoked subscription held
// is given back to its queue, as at any end of a session.
//
// A connection proved a secret at its handshake: its identity's own
// (Config.Session.Credentials), or the shared secret. A reload that
// changes that secret must not leave it up on the old one, which may be
// the very secret the change meant to retire: Rejudge closes it too
// (secretChanged), and its client reconnects with the new secret. The
// connections of identities whose secret did not change stay up.
//
// Nothing is judged per delivery: the push loop only watches its context,
// which a revocation cancels. A connection or subscription that was being
// admitted while Rejudge ran, under the rules it replaced, is judged once
// registered (see rejudgedSince).

// Rejudger is the optional part of a Router whose identities and rules
// change while connections are up. Its methods are called from Rejudge,
// and as a connection or subscription registers.
type Rejudger interface {
	// PeerRevoked returns why peer, which proved its identity at its
	// handshake, would not be admitted as it was now (its identity gone,
	// or granted less than the handshake gave it); nil if it would.
	PeerRevoked(peer session.Peer) error
	// SubscriptionRevoked returns why peer may no longer hold its
	// subscription of address (a topic pattern, if topic); nil if it may.
	SubscriptionRevoked(peer session.Peer, address string, topic bool) error
}

// Rejudge judges again every connection and client subscription that is
// open, under the router's current identities and rules (see Rejudger)
// and the secrets in force (see secretChanged): those that lost their
// grant are ended, with the reason. It does not wait for them to end.
func (s *Server) Rejudge() {
	rj, _ := s.router.(Rejudger)
	s.mu.Lock()
	s.rejudged++
	conns := make([]*session.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	subs := make([]*subscription, 0, len(s.subs))
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	ended := map[*session.Conn][]<-chan struct{}{}
	for _, sub := range subs {
		if sub.rejudge(rj, s.secretChanged(sub.conn)) {
			ended[sub.conn] = append(ended[sub.conn], sub.done)
		}
	}
	for _, c := range conns {
		if err := s.connRevoked(rj, c); err != nil {
			s.cut(c, err, ended[c])
		}
	}
}

// connRevoked returns why c may no longer stay up: its identity is no
// longer admitted as it was (rj, if the router has one), or the secret it
// proved is no longer the one in force.
func (s *Server) connRevoked(rj Rejudger, c *session.Conn) error {
	if rj != nil {
		if err := rj.PeerRevoked(c.Peer()); err != nil {
			return err
		}
	}
	return s.secretChanged(c)
}

// secretChanged returns why c must prove its secret again, or nil: the
// secret it proved at its handshake is not the one a connection of its
// identity must prove now. An identity removed from the credentials is
// the Rejudger's to judge (PeerRevoked), and nil here.
func (s *Server) secretChanged(c *session.Conn) error {
	s.mu.Lock()
	proved, ok := s.proofs[c]
	shared := s.secret
	s.mu.Unlock()
	if !ok {
		return nil // gone already
	}
	if !proved.identity {
		if bytes.Equal(proved.secret, shared) {
			return nil
		}
		return errors.New("the node's shared secret changed; reconnect with the new one")
	}
	name := c.Peer().Name
	cred, ok := s.cfg.Session.Credentials(name)
	if !ok || bytes.Equal(cred.Secret, proved.secret) {
		return nil
	}
	if cred.Secret == nil {
		return fmt.Errorf("the secret of identity %q was removed: it proves itself by its certificate now; reconnect", name)
	}
	return fmt.Errorf("the secret of identity %q changed; reconnect with the new one", name)
}

// rejudgedSince reports whether Rejudge ran since gen was read (rejudgeGen):
// what was admitted meanwhile may have been judged under the old rules.
// s.mu is held.
func (s *Server) rejudgedSince(gen uint64) bool { return s.rejudged != gen }

// rejudgeGen returns the count of Rejudge calls, read before what it
// admits is judged.
func (s *Server) rejudgeGen() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejudged
}

// stillAdmitted judges c again if Rejudge ran since gen, before c was
// tracked, and reports whether it may stay. One that may not is closed.
func (s *Server) stillAdmitted(c *session.Conn, gen uint64) bool {
	s.mu.Lock()
	again := s.rejudgedSince(gen)
	s.mu.Unlock()
	if !again {
		return true
	}
	rj, _ := s.router.(Rejudger)
	if err := s.connRevoked(rj, c); err != nil {
		s.log.Warn("connection closed: its identity was revoked", slog.String(logkey.Peer, c.Peer().Name), slog.Any(logkey.Error, err))
		c.Close()
		return false
	}
	return true
}

// proof is what a connection proved at its handshake: with credentials
// (identity), the secret its identity's credential had then, nil if a
// certificate vouched for it; without, the shared secret, nil for none.
type proof struct {
	secret   []byte
	identity bool
}

// cut closes c, whose identity was revoked (err), once the subscriptions
// it ended on c told their clients why (ended), or after the time an
// orderly close may take: closed first, the client would take the
// connection's loss for a network failure and wait to reconnect, instead
// of seeing its consumer denied.
func (s *Server) cut(c *session.Conn, err error, ended []<-chan struct{}) {
	s.mu.Lock()
	_, up := s.conns[c]
	if up {
		// c's serveConn holds s.wg until it untracked c: Stop cannot be
		// waiting on a zero count.
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if !up {
		return
	}
	go func() {
		defer s.wg.Done()
		timeout := time.NewTimer(s.handshakeTimeout() + time.Second)
		defer timeout.Stop()
	wait:
		for _, done := range ended {
			select {
			case <-done:
			case <-c.Done():
				return
			case <-timeout.C:
				break wait
			}
		}
		s.log.Warn("connection closed: its identity was revoked", slog.String(logkey.Peer, c.Peer().Name), slog.Any(logkey.Error, err))
		c.Close()
	}()
}

// register adds sub to the subscriptions Rejudge judges; gen is the count
// of Rejudge calls read before sub was admitted. If Rejudge ran since, sub
// is judged again now. unregister must follow.
func (s *Server) register(sub *subscription, gen uint64) {
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	again := s.rejudgedSince(gen)
	s.mu.Unlock()
	if again {
		rj, _ := s.router.(Rejudger)
		sub.rejudge(rj, s.secretChanged(sub.conn))
	}
}

// unregister removes sub, which ended and gave back what it held.
func (s *Server) unregister(sub *subscription) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
	close(sub.done)
}

// rejudge revokes sub if its connection must prove a new secret
// (secretChanged), or its peer or its subscription lost its grant (rj, if
// the router has one), and reports whether it did.
func (sub *subscription) rejudge(rj Rejudger, secretChanged error) bool {
	err := secretChanged
	if err == nil && rj != nil {
		err = rj.PeerRevoked(sub.peer)
		if err == nil {
			err = rj.SubscriptionRevoked(sub.peer, sub.sess.Address(), sub.topic)
		}
	}
	if err == nil {
		return false
	}
	sub.mu.Lock()
	if sub.revoked == "" {
		sub.revoked = err.Error()
	}
	sub.mu.Unlock()
	sub.stop()
	return true
}

// revokedReason is why the subscription was revoked, "" if it was not.
func (sub *subscription) revokedReason() string {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.revoked
}
