package receiver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// Who may speak for which origin.
//
// Dedupe keys on (Origin, ID), and ids are predictable, so a peer that
// could hand over messages under another node's origin could store that
// node's future ids first and have its real messages dropped as
// duplicates. So a peer hands over only messages of its own origin, the id
// it proved in the handshake, unless its identity is a permitted relay
// (session.Peer.Relay): a hub that forwards its plants' messages. A
// client's publishes always carry its own id. A peer of the shared secret
// is a member of a trusted network and may relay (see session.PeerMember).
//
// Which id an identity may prove is the Router's to hold (PeerBinder):
// the node binds each identity to its id, so that no identity can prove
// another's.

// PeerBinder is the part of a Router that holds identities to their ids.
// A Router without it binds nothing.
type PeerBinder interface {
	// BindPeer is called at the handshake, once the peer proved its
	// credentials and before the server proves its own. An error (wrapping
	// session.ErrAuth) refuses the connection with its text as the reason.
	BindPeer(peer session.Peer) error
}

// forgedLogEvery is how often a peer's forged origins are logged at most.
const forgedLogEvery = time.Minute

// checkOrigin returns why m may not come from peer, or "" if it may. A
// refusal is counted, and logged at most once per peer per minute.
// publish says m came on a client's publish session.
func (s *Server) checkOrigin(peer session.Peer, m *message.Message, publish bool) string {
	if m.Origin == peer.ID || peer.Relay && !publish {
		return ""
	}
	s.stats.ForgedOrigins.Add(1)
	if held, ok := s.forged.Allow(peer.Name); ok {
		s.log.Warn("messages with forged origins refused (logged once a minute per peer)",
			slog.String(logkey.Peer, peer.Name), slog.String("peer_id", peer.ID.String()),
			slog.String(logkey.Origin, m.Origin.String()), slog.Int64("suppressed", held))
	}
	if publish {
		return fmt.Sprintf("origin %s is not this client's id %s: a client publishes only messages of its own origin", m.Origin, peer.ID)
	}
	return fmt.Sprintf("origin %s is not %s's id %s, and %s is not a permitted relay here: a peer hands over only its own messages unless its peers entry has relay: true",
		m.Origin, peer.Name, peer.ID, peer.Name)
}

// sessionAllowed returns why peer may not open sess, or nil: a client
// identity publishes and subscribes, and opens no link or file session.
//
// A node identity opens link and file sessions only: a client that
// authenticates with a node's entry (petrel.Dial given it by mistake) is
// refused at its first session, before it could act, or be taken, as the
// node.
func sessionAllowed(peer session.Peer, sess *session.Session) error {
	if peer.Kind == session.PeerNode && (sess.Publish() || sess.Subscribe()) {
		return fmt.Errorf("%w: identity %q is a node; clients connect with an identity of kind client (kind: client in the node's peers)", ErrRefused, peer.Name)
	}
	if peer.Kind != session.PeerClient || sess.Publish() || sess.Subscribe() {
		return nil
	}
	what := "link"
	if sess.File() {
		what = "file"
	}
	return fmt.Errorf("%w: %q is a client identity, which may open publish and subscribe sessions only, not a %s session", ErrRefused, peer.Name, what)
}

// checkPeer is the session's CheckPeer: the TLS certificate's check, if
// any, then the Router's binding of the identity to its id.
func (s *Server) checkPeer(tlsCheck func(session.Peer) error) func(session.Peer) error {
	b, ok := s.router.(PeerBinder)
	switch {
	case !ok:
		return tlsCheck
	case tlsCheck == nil:
		return b.BindPeer
	}
	return func(p session.Peer) error {
		if err := tlsCheck(p); err != nil {
			return err
		}
		return b.BindPeer(p)
	}
}
