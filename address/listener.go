package address

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
)

// Listener receives announcements from the discovery group and keeps a
// Directory up to date: it adds and refreshes the nodes it hears (Heard),
// and every Period/2 removes those not heard within the Timeout (Expire).
//
// A packet that is malformed, foreign (another magic or version), badly
// signed, this node's own, or without a connector this node can use is
// dropped and counted in Stats. It never changes the directory. Nor does a
// stale one, which the directory refuses (see Directory.Heard): a replay.
//
// Start and Stop are not safe to call concurrently with each other, nor
// Addr with Start; Stats is safe at any time.
type Listener struct {
	d    discovery
	self message.NodeID
	dir  *Directory
	log  *slog.Logger

	conn   packetConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	received, accepted, malformed, badMAC, own, unusable, full, stale atomic.Uint64
	fullLog                                                           time.Time // when a dropped new node was last logged
	// comings bounds the lines of nodes discovered and expired: without
	// a secret anyone can announce new names without end, each worth
	// two lines. Past it, they go to debug level.
	comings ratelog.Budget
}

// comingsPerMinute is how many lines of nodes discovered and expired a
// Listener logs per minute at most, at info level.
const comingsPerMinute = 60

// ListenerStats count a Listener's packets since it was made. Received is
// the sum of the others.
type ListenerStats struct {
	Received  uint64 // datagrams read
	Accepted  uint64 // announcements put in the directory
	Malformed uint64 // not a valid announcement (ErrAnnouncement): garbage, foreign, truncated, too long
	BadMAC    uint64 // not signed with this node's secret (ErrAnnouncementMAC)
	Own       uint64 // this node's own announcements
	Unusable  uint64 // valid, but no connector this node can dial
	// Full counts the accepted announcements of new nodes that the
	// directory dropped because it held MaxNodes discovered nodes.
	Full uint64
	// Stale counts the accepted announcements that the directory refused
	// because they were not newer than the last one heard from their
	// node (Directory.Heard): replays, or a node whose clock stepped
	// back across a restart.
	Stale uint64
}

// NewListener returns a listener that feeds dir, for the node whose unique
// id is self (its own announcements are ignored). It sets dir's timeout to
// cfg's. Errors wrap ErrDiscoveryConfig.
func NewListener(cfg DiscoveryConfig, self message.NodeID, dir *Directory) (*Listener, error) {
	d, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	dir.SetTimeout(d.Timeout)
	dir.SetMaxDiscovered(d.MaxNodes)
	return &Listener{
		d: d, self: self, dir: dir, comings: ratelog.Budget{Lines: comingsPerMinute, Every: time.Minute, Now: d.Now},
		log: d.Logger.With(slog.String(logkey.Component, "discovery"), slog.String(logkey.Group, d.group.String())),
	}, nil
}

// Start opens the socket and starts listening and expiring. It returns
// once the socket is bound, so Addr is valid.
func (l *Listener) Start() error {
	conn, err := l.d.openListener(context.Background())
	if err != nil {
		return err
	}
	l.start(conn)
	return nil
}

// start runs the listener on conn, a real socket or a test's fake.
func (l *Listener) start(conn packetConn) {
	ctx, cancel := context.WithCancel(context.Background())
	l.conn, l.cancel = conn, cancel
	l.wg.Add(2)
	go l.readLoop(ctx)
	go l.expireLoop(ctx)
	l.log.Info("discovery listening", slog.String(logkey.Addr, conn.LocalAddr().String()), slog.Duration("timeout", l.d.Timeout))
}

// Stop closes the socket and waits for the loops to end. The directory
// keeps what it holds.
func (l *Listener) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.conn.Close() // unblocks ReadFrom
	l.wg.Wait()
	l.cancel = nil
	l.log.Info("discovery stopped")
}

// Addr returns the address the listener is bound to; nil before Start.
func (l *Listener) Addr() net.Addr {
	if l.conn == nil {
		return nil
	}
	return l.conn.LocalAddr()
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	return ListenerStats{
		Received:  l.received.Load(),
		Accepted:  l.accepted.Load(),
		Malformed: l.malformed.Load(),
		BadMAC:    l.badMAC.Load(),
		Own:       l.own.Load(),
		Unusable:  l.unusable.Load(),
		Full:      l.full.Load(),
		Stale:     l.stale.Load(),
	}
}

// readLoop reads datagrams until the socket closes.
func (l *Listener) readLoop(ctx context.Context) {
	defer l.wg.Done()
	// One byte more than the largest announcement, so that a longer
	// datagram shows as too long instead of being cut to a valid size.
	buf := make([]byte, MaxAnnouncementSize+1)
	var delay time.Duration
	for {
		n, from, err := l.conn.ReadFrom(buf)
		if err == nil {
			delay = 0
			l.handle(buf[:n], from)
			continue
		}
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			return
		}
		// A read error on an unconnected UDP socket is rare and passing
		// (memory pressure): back off, keep listening.
		delay = min(max(2*delay, 10*time.Millisecond), time.Second)
		l.log.Warn("discovery read failed", slog.Any(logkey.Error, err), slog.Duration("retry_in", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// handle checks one datagram and puts the node it announces in the
// directory. Drops are logged at debug level only: a busy network can send
// many, and the counters say how many.
func (l *Listener) handle(p []byte, from net.Addr) {
	l.received.Add(1)
	a, err := DecodeAnnouncement(p, l.d.Secret)
	switch {
	case errors.Is(err, ErrAnnouncementMAC):
		l.badMAC.Add(1)
		l.log.Debug("announcement dropped", slog.Any(logkey.From, from), slog.Any(logkey.Error, err))
		return
	case err != nil:
		l.malformed.Add(1)
		l.log.Debug("announcement dropped", slog.Any(logkey.From, from), slog.Any(logkey.Error, err))
		return
	case a.ID == l.self:
		l.own.Add(1)
		return
	}
	cs, err := a.Connectors()
	if err != nil {
		l.unusable.Add(1)
		l.log.Debug("announcement dropped", slog.Any(logkey.From, from), slog.Any(logkey.Error, err))
		return
	}
	l.accepted.Add(1)
	added, dropped, stale := l.dir.heard(Entry{Name: a.Name, ID: a.ID, Connectors: cs, Seq: a.Seq}, l.d.Now())
	switch {
	case stale:
		l.stale.Add(1)
		l.log.Debug("stale announcement dropped", slog.String(logkey.Node, a.Name), slog.String(logkey.NodeID, a.ID.String()),
			slog.Uint64("seq", a.Seq), slog.Any(logkey.From, from))
	case added:
		l.logComing("node discovered", slog.String(logkey.Node, a.Name), slog.String(logkey.NodeID, a.ID.String()),
			slog.String("connectors", cs.String()), slog.Any(logkey.From, from))
	case dropped:
		l.dropFull(a, from)
	}
}

// dropFull counts an announcement of a new node the full directory
// dropped, and logs it at most once a minute: a flood of invented ids must
// not flood the log.
func (l *Listener) dropFull(a Announcement, from net.Addr) {
	l.full.Add(1)
	now := l.d.Now()
	if now.Sub(l.fullLog) < time.Minute {
		return
	}
	l.fullLog = now
	l.log.Warn("node directory full: announcements of new nodes are dropped; raise discovery.max_nodes if the network is this large",
		slog.String(logkey.Node, a.Name), slog.String(logkey.NodeID, a.ID.String()), slog.Any(logkey.From, from),
		slog.Int("max_nodes", l.d.MaxNodes), slog.Uint64("dropped", l.full.Load()))
}

// expireLoop removes silent nodes every Period/2, so a node leaves the
// directory at most Period/2 after its timeout.
func (l *Listener) expireLoop(ctx context.Context) {
	defer l.wg.Done()
	ticker := time.NewTicker(l.d.Period / 2)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for _, e := range l.dir.Expire(l.d.Now()) {
			l.logComing("node expired", slog.String(logkey.Node, e.Name), slog.String(logkey.NodeID, e.ID.String()),
				slog.Time("last_seen", e.LastSeen))
		}
	}
}

// logComing logs a node discovered or expired at info level, within
// comingsPerMinute lines a minute, and at debug level past it.
func (l *Listener) logComing(msg string, attrs ...any) {
	if held, ok := l.comings.Allow(); ok {
		if held > 0 {
			attrs = append(attrs, slog.Int64("suppressed", held))
		}
		l.log.Info(msg, attrs...)
		return
	}
	l.log.Debug(msg, attrs...)
}
