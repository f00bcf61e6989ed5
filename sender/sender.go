package sender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// Config tunes senders. Zero fields take their defaults.
type Config struct {
	// Window is the most messages in flight per session (default 4096).
	Window int
	// WindowBytes bounds the bytes of the messages in flight per session
	// (default DefaultWindowBytes). Under it the next message goes
	// whatever its size, so the flight holds at most WindowBytes plus one
	// message.
	WindowBytes int64
	// ReconnectMin and ReconnectMax bound the backoff (100ms, 1s).
	ReconnectMin, ReconnectMax time.Duration
	// MainProbe is how often a sender on a failover backup checks whether
	// the main connector is back (default 5s).
	MainProbe time.Duration
	// StallAfter is how long a full window may go without an ack before
	// the link is reported stalled (default 10s).
	StallAfter time.Duration
	// Files tunes file transfers.
	Files FileConfig
	// TLS configures tls:// connectors: the roots that verify servers and
	// the client certificate, if any. ServerName, when empty, is the
	// connector's host, or its server_name option. Nil means the system's
	// roots and no client certificate.
	TLS *tls.Config
	// Now is the clock for TTL arithmetic; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultWindowBytes is Config.WindowBytes' default: with a thousand
// messages of 256 KiB in flight a sender held 250 MB for one session.
const DefaultWindowBytes = 16 << 20

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = 4096
	}
	if c.WindowBytes <= 0 {
		c.WindowBytes = DefaultWindowBytes
	}
	if c.ReconnectMin <= 0 {
		c.ReconnectMin = 100 * time.Millisecond
	}
	if c.ReconnectMax <= 0 {
		// A peer that comes back is found within a second: a refused
		// connect costs next to nothing, and a backlog waits for it.
		c.ReconnectMax = time.Second
	}
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	if c.MainProbe <= 0 {
		c.MainProbe = 5 * time.Second
	}
	if c.StallAfter <= 0 {
		c.StallAfter = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// NextHop resolves the neighbour that carries traffic for a node.
type NextHop func(node string) (string, bool)

// Sender forwards one send queue, named "address@node", to the next hop
// toward node.
type Sender struct {
	cfg  Config
	q    *queue.Queue
	dest string // the destination node
	hop  NextHop
	pool *Pool
	log  *slog.Logger
	st   status

	files files

	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	resetStream context.CancelFunc // ends the current session, if any
}

// New makes a sender for q, whose messages go to node dest. Start runs it.
func New(cfg Config, q *queue.Queue, dest string, hop NextHop, pool *Pool) *Sender {
	cfg = cfg.withDefaults()
	return &Sender{
		cfg: cfg, q: q, dest: dest, hop: hop, pool: pool,
		log: cfg.Logger.With(slog.String(logkey.Component, "sender"), slog.String(logkey.Queue, q.Name())),
	}
}

// Start starts the sender's loop. It returns at once.
func (s *Sender) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done = make(chan struct{})
	s.startFiles(ctx)
	go s.linkLoop(ctx)
}

// Stop stops the sender and waits for it. Messages in flight go back to
// the queue.
func (s *Sender) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.stopFiles()
}

// Queue returns the send queue.
func (s *Sender) Queue() *queue.Queue { return s.q }

// linkLoop connects, streams until the link fails, backs off and starts
// again, until ctx ends.
func (s *Sender) linkLoop(ctx context.Context) {
	defer close(s.done)
	attempt := 0
	for ctx.Err() == nil {
		err := s.connectAndStream(ctx)
		if ctx.Err() != nil {
			s.st.set(StateStopped, nil, "")
			return
		}
		if err == nil {
			attempt = 0 // an orderly end after traffic: start again at once
			continue
		}
		attempt++
		wait, dialFailed := s.retryWait(attempt, err)
		s.st.set(StateBackingOff, err, "")
		s.st.reconnects.Add(1)
		s.logFailure(err, wait, dialFailed)
		s.pause(ctx, wait, err)
	}
	s.st.set(StateStopped, nil, "")
}

// logFailure logs why the link failed, before its backoff of wait. The
// pool logs the failed dials of a neighbour once for all its send queues;
// a neighbour's full store is logged the same way, once per 30 s for all
// the send queues toward it, since each of them tries again after every
// backoff until the store has room, and so is a node with no route.
func (s *Sender) logFailure(err error, wait time.Duration, dialFailed bool) {
	attrs := []any{slog.Duration("wait", wait), slog.Any(logkey.Error, err)}
	switch {
	case s.logNoRoute(err, wait):
	case dialFailed:
		s.log.Debug("link failed; backing off", attrs...)
	case errors.Is(err, session.ErrFull):
		if held, ok := s.pool.fullLog.Allow(s.st.hopName()); ok {
			s.log.Warn("next hop's store full; its send queues back off and send again (logged once per 30s per node)",
				append(attrs, slog.Int64("suppressed", held))...)
		} else {
			s.log.Debug("link failed; backing off", attrs...)
		}
	default:
		s.log.Warn("link failed; backing off", attrs...)
	}
}

// retryWait is how long to wait after the attempt-th failure in a row,
// err. A sender without a route waits up to noRouteWait, as it is woken
// when one may have come back (see pause). A failed dial of the next hop
// is the pool's, shared by every send
// queue toward it: the wait lasts until the pool dials again (dialFailed),
// at most ReconnectMax, and a few ms more at random, so that the senders
// woken together find that dial under way, or done, and share it.
func (s *Sender) retryWait(attempt int, err error) (wait time.Duration, dialFailed bool) {
	if errors.As(err, new(*noRouteError)) {
		return noRouteWait/2 + rand.N(noRouteWait/2+1), false
	}
	var de *dialError
	if !errors.As(err, &de) || de.retryAt.IsZero() {
		return s.backoff(attempt), false
	}
	wait = min(max(time.Until(de.retryAt), 0), s.cfg.ReconnectMax)
	return wait + rand.N(10*time.Millisecond), true
}

// backoff is ReconnectMin doubled per failed attempt, capped, with
// jitter: a random wait in [d/2, d], so that senders cut at the same
// moment do not come back at the same moment.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.cfg.ReconnectMin
	for i := 1; i < attempt && d < s.cfg.ReconnectMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.ReconnectMax)
	return d/2 + rand.N(d/2+1)
}

// connectAndStream resolves the next hop, opens a session on the shared
// connection to it and streams the queue. It returns when the session
// ends, with the reason.
func (s *Sender) connectAndStream(ctx context.Context) error {
	hop, err := s.resolveHop()
	if err != nil {
		return err
	}
	s.st.set(StateConnecting, nil, hop)
	conn, sess, err := s.pool.Open(ctx, hop, func(c *session.Conn) (*session.Session, error) {
		return c.Open(ctx, s.q.Name(), uint32(s.cfg.Window))
	})
	if err != nil {
		return fmt.Errorf("open session to %s: %w", hop, err)
	}
	s.st.set(StateConnected, nil, hop)
	s.st.addr.Store(s.pool.Addr(hop))
	s.log.Info("link up", slog.String(logkey.Hop, hop))
	sctx, reset := context.WithCancel(ctx)
	s.mu.Lock()
	s.resetStream = reset
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.resetStream = nil
		s.mu.Unlock()
		reset()
	}()
	err = s.stream(sctx, conn, sess, hop)
	if sctx.Err() != nil && ctx.Err() == nil {
		return nil // reset on purpose: reconnect at once
	}
	return err
}

// Reconnect ends the current session, if any; the sender connects again at
// once, resolving the next hop anew. What was in flight is sent again.
func (s *Sender) Reconnect() {
	s.mu.Lock()
	if s.resetStream != nil {
		s.resetStream()
	}
	s.mu.Unlock()
}

// hopNow is the next hop the sender would use if it connected now.
func (s *Sender) hopNow() string {
	hop, _ := s.hop(s.dest)
	return hop
}

// prepare returns the bytes to send for d, with its remaining TTL patched
// in, or false if its TTL ran out since it was polled.
func (s *Sender) prepare(d *queue.Delivery) ([]byte, bool) {
	data := d.Data
	if d.ExpiresAt.IsZero() {
		return data, true
	}
	left := d.ExpiresAt.Sub(s.cfg.Now())
	if left <= 0 {
		return nil, false
	}
	data = append([]byte(nil), data...)
	if err := message.SetEncodedTTL(data, left); err != nil {
		return nil, false
	}
	return data, true
}
