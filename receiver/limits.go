package receiver

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/session"
)

// Defaults of the connection bounds in Config.
const (
	// DefaultMaxHandshakes bounds the connections still in their TLS or
	// session handshake, from every address together.
	DefaultMaxHandshakes = 256
	// DefaultMaxHandshakesPerIP bounds them per remote IP address, so that
	// one host cannot take every handshake slot.
	DefaultMaxHandshakesPerIP = 16
	// DefaultMaxConnections bounds the connections open at once, in their
	// handshake or authenticated.
	DefaultMaxConnections = 1024
)

// Reasons a connection is closed at accept, as counted in
// Stats.Rejected and logged.
const (
	RejectHandshakes      = "handshakes"        // max_handshakes connections are in their handshake
	RejectHandshakesPerIP = "handshakes_per_ip" // the remote IP has max_handshakes_per_ip in theirs
	RejectConnections     = "connections"       // max_connections are open
)

// rejectLogEvery is how often, at most, one reason's rejections are
// logged: a flood of connections makes a line every ten seconds with the
// count of the ones not logged, not a line each.
const rejectLogEvery = 10 * time.Second

// connLimits counts the connections open and in their handshake, in total
// and per remote IP, and decides at accept whether one more may open. The
// accept loop checks before it starts any goroutine, so a rejected
// connection costs one accept and one close.
type connLimits struct {
	maxHandshakes, maxPerIP, maxConns int

	mu          sync.Mutex
	open        int // connections open: handshaking or authenticated
	handshaking int
	perIP       map[netip.Addr]int // handshaking connections per remote IP

	rejected [3]atomic.Int64 // by reason, in the order of rejectReasons
	log      ratelog.Limiter
}

var rejectReasons = [3]string{RejectHandshakes, RejectHandshakesPerIP, RejectConnections}

func newConnLimits(cfg Config) *connLimits {
	return &connLimits{
		maxHandshakes: orDefaultInt(cfg.MaxHandshakes, DefaultMaxHandshakes),
		maxPerIP:      orDefaultInt(cfg.MaxHandshakesPerIP, DefaultMaxHandshakesPerIP),
		maxConns:      orDefaultInt(cfg.MaxConnections, DefaultMaxConnections),
		perIP:         map[netip.Addr]int{},
		log:           ratelog.Limiter{Every: rejectLogEvery},
	}
}

func orDefaultInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// connSlot is one admitted connection's place in the counts. The
// connection's goroutine calls handshakeDone when its handshakes end, in
// success or not, and release when the connection closes.
type connSlot struct {
	l    *connLimits
	ip   netip.Addr
	mu   sync.Mutex
	hs   bool // still counted as handshaking
	open bool // still counted as open
	// releaseIdentity gives back the connection's place among its client
	// identity's (identityCounts.takeConn); nil if it holds none.
	releaseIdentity func()
}

// admit takes a slot for a connection from ip, or returns the reason it
// must be closed at once.
func (l *connLimits) admit(ip netip.Addr) (*connSlot, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= l.maxConns:
		return nil, 2
	case l.handshaking >= l.maxHandshakes:
		return nil, 0
	case l.perIP[ip] >= l.maxPerIP:
		return nil, 1
	}
	l.open++
	l.handshaking++
	l.perIP[ip]++
	return &connSlot{l: l, ip: ip, hs: true, open: true}, -1
}

// handshakeDone gives the handshake slot back; the connection stays
// counted as open. Safe to call more than once.
func (c *connSlot) handshakeDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hs {
		return
	}
	c.hs = false
	l := c.l
	l.mu.Lock()
	l.handshaking--
	if l.perIP[c.ip]--; l.perIP[c.ip] <= 0 {
		delete(l.perIP, c.ip)
	}
	l.mu.Unlock()
}

// release gives every slot of the connection back.
func (c *connSlot) release() {
	c.handshakeDone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open {
		return
	}
	c.open = false
	c.l.mu.Lock()
	c.l.open--
	c.l.mu.Unlock()
	if c.releaseIdentity != nil {
		c.releaseIdentity()
		c.releaseIdentity = nil
	}
}

// counts returns the connections open and those in their handshake.
func (l *connLimits) counts() (open, handshaking int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.handshaking
}

// remoteIP is the IP address of nc's peer; the zero Addr when it has none
// (all such connections then share one per-IP count).
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// admit decides whether the connection nc just accepted may run its
// handshake. If not, it closes nc, counts it and logs, at most once per
// reason every rejectLogEvery, with the count of those not logged.
func (s *Server) admit(nc net.Conn) (*connSlot, bool) {
	ip := remoteIP(nc)
	slot, reason := s.limits.admit(ip)
	if slot != nil {
		return slot, true
	}
	// Counted before the close, which the peer sees.
	s.limits.rejected[reason].Add(1)
	_ = nc.Close()
	if suppressed, ok := s.limits.log.Allow(rejectReasons[reason]); ok {
		s.log.Warn("connection rejected: too many connections; raise the link limits if this is legitimate load",
			slog.String("reason", rejectReasons[reason]), slog.String(logkey.Peer, ip.String()),
			slog.Int("max_handshakes", s.limits.maxHandshakes), slog.Int("max_handshakes_per_ip", s.limits.maxPerIP),
			slog.Int("max_connections", s.limits.maxConns), slog.Int64("suppressed", suppressed))
	}
	return nil, false
}

// ConnCounts are the receiver's connection bounds at work.
type ConnCounts struct {
	Open, Handshaking int
	// Rejected counts the connections closed at accept, by reason
	// (RejectHandshakes, RejectHandshakesPerIP, RejectConnections).
	Rejected map[string]int64
}

// ConnCounts returns the connections open and in their handshake now, and
// those rejected since the server started.
func (s *Server) ConnCounts() ConnCounts {
	open, hs := s.limits.counts()
	cc := ConnCounts{Open: open, Handshaking: hs, Rejected: map[string]int64{}}
	for i, r := range rejectReasons {
		cc.Rejected[r] = s.limits.rejected[i].Load()
	}
	return cc
}

// handshakeFailed logs a connection that failed its TLS or session
// handshake, at most once per kind every rejectLogEvery: a flood of
// connections that never finish their handshake must not flood the log.
// The counters (Stats) count every one.
func (s *Server) handshakeFailed(msg, remote string, err error) {
	if suppressed, ok := s.limits.log.Allow(msg); ok {
		s.log.Warn(msg, slog.String(logkey.Peer, remote), slog.Any(logkey.Error, err), slog.Int64("suppressed", suppressed))
	}
}

// BufferStats returns the bytes of Data the server's connections hold
// for their sessions, and how often their read loops paused at
// Session.MaxConnBuffer.
func (s *Server) BufferStats() *session.BufferStats { return s.cfg.Session.BufferStats }

// RefuseStats returns the sessions the server's connections refused
// before Accept saw them, past Session.MaxSessions (session.DefaultMaxSessions
// unless set) on one connection. Stats.SessionsRefused does not count them.
func (s *Server) RefuseStats() *session.RefuseStats { return s.cfg.Session.RefuseStats }
