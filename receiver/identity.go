package receiver

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/session"
)

// Defaults of the bounds on what one client identity holds open.
const (
	// DefaultMaxSessionsPerIdentity bounds the publish and subscribe
	// sessions one client identity holds open at once, across all its
	// connections: about four client Dials whose connections are full. Each
	// subscribe session costs the node a few goroutines and about 13 KB;
	// bounded only per connection (session.DefaultMaxSessions) and by
	// MaxConnections, one identity could hold a million of them.
	DefaultMaxSessionsPerIdentity = 4096
	// DefaultMaxConnectionsPerIdentity bounds the connections one client
	// identity holds open at once, so that one identity cannot take every
	// place of MaxConnections and shut the others out. A client Dial opens
	// one, and one more for each 1,023 consumers past the first connection's.
	DefaultMaxConnectionsPerIdentity = 64
)

// identityCounts count the sessions and connections each client identity
// holds open, and refuse those past their bounds.
//
// Only identities of kind client are counted. A node's links carry one
// session per send queue toward this node and one per file on the move,
// however many its own producers make; bounding them would stall relaying
// for a cause the node's operator cannot see from here. A shared-secret
// member proves no identity, only a name it may change at will, so a bound
// by name would hold it to nothing.
type identityCounts struct {
	maxSessions, maxConns int

	mu       sync.Mutex
	sessions map[string]int // publish and subscribe sessions open, by identity
	conns    map[string]int // connections authenticated, by identity

	refusedSessions atomic.Int64
	refusedConns    atomic.Int64
}

func newIdentityCounts(cfg Config) *identityCounts {
	return &identityCounts{
		maxSessions: orDefaultInt(cfg.MaxSessionsPerIdentity, DefaultMaxSessionsPerIdentity),
		maxConns:    orDefaultInt(cfg.MaxConnectionsPerIdentity, DefaultMaxConnectionsPerIdentity),
		sessions:    map[string]int{},
		conns:       map[string]int{},
	}
}

// bounded reports whether peer's sessions and connections are counted.
func bounded(peer session.Peer) bool { return peer.Kind == session.PeerClient }

// takeSession takes a session's place for peer. It returns release, which
// gives it back, to be called once when the session ends; or, past the
// bound, the reason the session is refused with, which is counted.
func (ic *identityCounts) takeSession(peer session.Peer) (release func(), err error) {
	if !bounded(peer) {
		return func() {}, nil
	}
	give, n, ok := ic.take(ic.sessions, peer.Name, ic.maxSessions)
	if !ok {
		ic.refusedSessions.Add(1)
		return nil, fmt.Errorf("%w: identity %q holds %d sessions on this node already, across all its connections (link.max_sessions_per_identity): close consumers it no longer needs, or raise the bound",
			ErrRefused, peer.Name, n)
	}
	var once sync.Once
	return func() { once.Do(give) }, nil
}

// takeConn records that slot's connection proved peer, or returns the
// reason it is refused with, which is counted, past the bound. The
// connection's place is given back with the slot's (release).
func (ic *identityCounts) takeConn(slot *connSlot, peer session.Peer) error {
	if !bounded(peer) {
		return nil
	}
	release, n, ok := ic.take(ic.conns, peer.Name, ic.maxConns)
	if !ok {
		ic.refusedConns.Add(1)
		return fmt.Errorf("%w: identity %q holds %d connections to this node already (link.max_connections_per_identity): close clients it no longer needs, or raise the bound",
			session.ErrRefused, peer.Name, n)
	}
	slot.mu.Lock()
	slot.releaseIdentity = release
	slot.mu.Unlock()
	return nil
}

// take counts one more for name in counts, unless it holds max already;
// it returns what gives that one back, and how many name held before.
func (ic *identityCounts) take(counts map[string]int, name string, max int) (release func(), held int, ok bool) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	held = counts[name]
	if held >= max {
		return nil, held, false
	}
	counts[name] = held + 1
	return func() {
		ic.mu.Lock()
		if counts[name]--; counts[name] <= 0 {
			delete(counts, name)
		}
		ic.mu.Unlock()
	}, held, true
}

// IdentityCounts are the bounds on what one client identity holds open, at
// work.
type IdentityCounts struct {
	// MaxSessions and MaxConnections are the bounds per identity.
	MaxSessions, MaxConnections int
	// Sessions and Connections are the publish and subscribe sessions and
	// the connections client identities hold open now, all together.
	Sessions, Connections int
	// SessionsRefused and ConnectionsRefused count those refused past the
	// bounds since the server started.
	SessionsRefused, ConnectionsRefused int64
}

// IdentityCounts returns the sessions and connections client identities
// hold open now, and those refused past the bounds per identity.
func (s *Server) IdentityCounts() IdentityCounts {
	ic := s.idents
	ic.mu.Lock()
	defer ic.mu.Unlock()
	out := IdentityCounts{
		MaxSessions: ic.maxSessions, MaxConnections: ic.maxConns,
		SessionsRefused: ic.refusedSessions.Load(), ConnectionsRefused: ic.refusedConns.Load(),
	}
	for _, n := range ic.sessions {
		out.Sessions += n
	}
	for _, n := range ic.conns {
		out.Connections += n
	}
	return out
}

// identityRefused logs a session refused past MaxSessionsPerIdentity, at
// most once per identity every rejectLogEvery: a client that opens
// consumers in a loop must not flood the log. The counters count every
// one.
func (s *Server) identityRefused(peer session.Peer, err error) {
	if suppressed, ok := s.limits.log.Allow("identity sessions " + peer.Name); ok {
		s.log.Warn("session refused: too many for one identity; raise link.max_sessions_per_identity if this is legitimate load",
			slog.String(logkey.Peer, peer.Name), slog.Any(logkey.Error, err), slog.Int64("suppressed", suppressed))
	}
}
