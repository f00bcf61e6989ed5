package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// subscription is a remote Consumer: a subscribe session on the Client's
// connection, opened again after a reconnect.
//
// The node pushes deliveries while it has credit; the session buffers
// them, at most the window. Each delivery the application takes earns the
// node one credit back, granted in batches of a quarter window, or
// grantDelay after the take if the batch is not full by then: the node
// starts a delivery's lease when that credit tells it the delivery was
// taken, so a credit kept back would leave a stalled handler's lease
// never timing out. Acks are batched too: Ack queues the tag and the
// Client's flushLoop sends what queued meanwhile in one Settle. Nacks and
// releases go at once.
//
// A delivery belongs to the session it came on (gen). When that session
// ends the node gives its lease back, so settling it then is ErrLeaseLost.
type subscription struct {
	c      *Client
	addr   string                     // the address, or the topic pattern
	topic  *session.TopicSubscription // the topic subscription; nil for an address
	window uint32                     // the window asked for; the node may grant less

	flushMu sync.Mutex // one flush at a time: it swaps acks and spare

	mu      sync.Mutex
	conn    *session.Conn    // the connection sess is on
	sess    *session.Session // nil while there is none
	gen     uint64           // counts the sessions
	changed chan struct{}    // closed and replaced when sess changes or err is set
	taken   uint32           // deliveries taken since the last grant
	grantAt uint32           // a quarter of sess's window: grant when taken reaches it
	acks    []uint64         // tags acked on sess, not yet sent
	spare   []uint64
	err     error // why the subscription ended for good
	// retry is the wait before subscribing again after the node ended a
	// session on a live connection, doubled each time up to ReconnectMax
	// and cleared by a delivery taken; retryAt is when that wait ends.
	// A node that accepts the subscription and ends it at once is thus
	// asked less and less often, never in a hot loop.
	retry   time.Duration
	retryAt time.Time
	// grantTimer grants what was taken grantDelay after a take, if the
	// batch did not fill by then; grantArmed says it is set.
	grantTimer *time.Timer
	grantArmed bool
}

func newSubscription(c *Client, addr string) *subscription {
	w := uint32(c.opts.ConsumerWindow)
	return &subscription{c: c, addr: addr, window: w, changed: make(chan struct{})}
}

// Subscribe makes or joins a topic subscription on the node, as
// Node.Subscribe does there, and consumes from it as Consumer does from an
// address: the same window, batching, reconnects and leases. A durable
// subscription outlives the consumer and the connection, and keeps
// accumulating meanwhile. A non-durable one ends when the last session on
// it does: a private one (no Name) after a reconnect is a new one, and
// what was published while the connection was down is not in it.
// opts.Policy cannot be set from a client (ErrNotSupported): the node's
// default policy applies. The Consumer's Address is the subscription's
// queue, sub:<name>, or the pattern for a private one, whose name only
// the node knows.
func (c *Client) Subscribe(ctx context.Context, pattern string, opts SubscribeOptions) (*Consumer, error) {
	if opts.Policy != (QueuePolicy{}) {
		return nil, fmt.Errorf("subscribe to %q through a client with a queue policy: %w (set the policy on the node)", pattern, ErrNotSupported)
	}
	if opts.Durable && opts.Name == "" {
		return nil, fmt.Errorf("subscribe to %q: a durable subscription needs a name: %w", pattern, ErrSubscription)
	}
	sub := newSubscription(c, pattern)
	sub.topic = &session.TopicSubscription{Name: opts.Name, Durable: opts.Durable}
	if err := sub.start(ctx); err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", pattern, err)
	}
	addr := pattern
	if opts.Name != "" {
		addr = subQueuePrefix + opts.Name
	}
	return &Consumer{b: sub, addr: addr}, nil
}

// open opens the subscription's session on conn.
func (s *subscription) open(ctx context.Context, conn *session.Conn) (*session.Session, error) {
	if s.topic != nil {
		return conn.OpenTopic(ctx, s.addr, *s.topic, s.window)
	}
	return conn.OpenSubscribe(ctx, s.addr, s.window)
}

// start registers the subscription with the client and subscribes. A
// refusal is returned; a connection lost meanwhile is not: the client
// subscribes again when it reconnects.
func (s *subscription) start(ctx context.Context) error {
	c := s.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	conn, err := s.waitConn(ctx)
	if err != nil {
		s.unregister()
		return err
	}
	conn, sess, err := s.openSession(ctx, conn)
	if err != nil {
		if conn != nil && conn.Err() != nil && ctx.Err() == nil {
			return nil // lost with the connection: resubscribed with the next one
		}
		s.unregister()
		return remoteErr(err)
	}
	s.set(conn, sess)
	return nil
}

// waitConn returns the client's connection, waiting for a reconnect.
func (s *subscription) waitConn(ctx context.Context) (*session.Conn, error) {
	for {
		if conn := s.c.current(); conn != nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not connected to the node: %w", ctx.Err())
		case <-s.c.ctx.Done():
			return nil, ErrClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *subscription) unregister() {
	s.c.mu.Lock()
	delete(s.c.subs, s)
	s.c.mu.Unlock()
}

// resubscribe subscribes again on a new connection. A refusal now ends
// the subscription: its Receive returns the reason.
func (s *subscription) resubscribe(conn *session.Conn) {
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.opts.HandshakeTimeout)
	defer cancel()
	conn, sess, err := s.openSession(ctx, conn)
	if err != nil {
		if conn == nil && !errors.Is(err, session.ErrLimit) && s.c.ctx.Err() == nil {
			// No connection with room, and the dial of another failed:
			// the placeLoop tries again, and logs once for all.
			s.c.wakePlace()
			return
		}
		if (conn == nil || conn.Err() == nil) && s.c.ctx.Err() == nil {
			if !refused(err) {
				// No answer in time (a node shutting down takes no new
				// session, and closes the connection once its sessions
				// are done): not the node's word, try again.
				s.c.wakePlace()
				return
			}
			s.c.log.Warn("consumer refused on reconnect", slog.String(logkey.Address, s.addr), slog.Any(logkey.Error, err))
			s.fail(fmt.Errorf("consumer of %q ended: the node refused it on reconnect: %w: %w", s.addr, remoteErr(err), ErrClosed))
		}
		return
	}
	s.set(conn, sess)
}

// set makes sess the subscription's session, unless conn is no longer one
// of the client's (a reconnect overtook this subscribe), the subscription
// ended, or it has a live session already (the reconnect of the client's
// connection and the loss of one past it both subscribe the consumers of
// the lost one again).
func (s *subscription) set(conn *session.Conn, sess *session.Session) {
	s.mu.Lock()
	if s.err != nil || !s.c.holds(conn) || s.sess != nil && s.conn.Err() == nil {
		s.mu.Unlock()
		closeSession(sess, s.c.opts.HandshakeTimeout)
		return
	}
	s.conn, s.sess = conn, sess
	s.gen++
	s.taken, s.acks = 0, s.acks[:0]
	// The node's window may be smaller than the one asked for: grant by
	// what it holds, or it waits for credit that never comes.
	s.grantAt = max(sess.Window()/4, 1)
	s.changedLocked()
	s.mu.Unlock()
}

// detachFrom forgets the session on conn, lost, and reports whether it
// had one there. A session the node ended with a denial before conn was
// lost ends the subscription instead (see endedByNode).
func (s *subscription) detachFrom(conn *session.Conn) bool {
	s.mu.Lock()
	if s.sess == nil || s.conn != conn {
		s.mu.Unlock()
		return false
	}
	if err := s.sess.Err(); errors.Is(err, session.ErrDenied) {
		s.mu.Unlock()
		s.fail(s.endedByNode(err))
		return false
	}
	s.detachLocked()
	s.mu.Unlock()
	return true
}

// closed returns why the subscription ended for good, nil while it has
// not: once closed, or ended by the node.
func (s *subscription) closed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// over reports whether the subscription ended for good.
func (s *subscription) over() bool { return s.closed() != nil }

// onLiveConn reports whether the subscription has a session on a live
// connection.
func (s *subscription) onLiveConn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess != nil && s.conn.Err() == nil
}

// detachIf forgets sess, if it is still the subscription's session.
func (s *subscription) detachIf(sess *session.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil || s.sess != sess {
		return
	}
	s.detachLocked()
}

func (s *subscription) detachLocked() {
	s.conn, s.sess = nil, nil
	s.taken, s.acks = 0, s.acks[:0]
	s.changedLocked()
}

// fail ends the subscription for good with err.
func (s *subscription) fail(err error) *session.Session {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	sess := s.sess
	s.conn, s.sess = nil, nil
	if s.grantTimer != nil {
		s.grantTimer.Stop()
	}
	s.changedLocked()
	s.mu.Unlock()
	s.unregister()
	return sess
}

func (s *subscription) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// state returns the current session (nil if none), its generation, a
// channel closed when that changes, and why the subscription ended.
func (s *subscription) state() (*session.Session, uint64, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess, s.gen, s.changed, s.err
}

// receive is Consumer.Receive for a remote consumer. While the connection
// is down it waits for the next one.
func (s *subscription) receive(ctx context.Context) (*Delivery, error) {
	for {
		sess, gen, changed, err := s.state()
		if err != nil {
			return nil, err
		}
		if sess == nil {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		d, err := sess.NextDelivery(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.ended(sess, err)
			continue
		}
		if del := s.take(sess, gen, d); del != nil {
			return del, nil
		}
	}
}

// poll is Consumer.Poll for a remote consumer: a delivery that the node
// pushed already, or ErrNoMessage.
func (s *subscription) poll() (*Delivery, error) {
	for {
		sess, gen, _, err := s.state()
		if err != nil {
			return nil, err
		}
		if sess == nil {
			return nil, ErrNoMessage
		}
		d, ok := sess.TryNextDelivery()
		if !ok {
			if err := sess.Err(); err != nil {
				s.ended(sess, err)
				continue
			}
			return nil, ErrNoMessage
		}
		if del := s.take(sess, gen, d); del != nil {
			return del, nil
		}
	}
}

// refused reports whether err, from subscribing, is the node's answer:
// a refusal, a denial, or no room on any connection. Anything else (no
// answer in time, the connection lost) may pass.
func refused(err error) bool {
	return errors.Is(err, session.ErrRefused) || errors.Is(err, session.ErrDenied) || errors.Is(err, session.ErrLimit)
}

// ended handles the end of sess while a receive waited on it. A denial
// ends the subscription. Lost with the connection, the client subscribes
// again when it reconnects. Ended by the node on a live connection (a
// node shutting down closes its sessions in order before its
// connections), the placeLoop subscribes again after s.retry: a node
// that refuses then ends the subscription with its reason.
func (s *subscription) ended(sess *session.Session, err error) {
	if errors.Is(err, session.ErrDenied) {
		s.mu.Lock()
		current := s.sess == sess
		s.mu.Unlock()
		if current {
			s.fail(s.endedByNode(err))
		}
		return
	}
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	byNode := s.conn.Err() == nil
	var wait time.Duration
	if byNode {
		s.retry = min(max(2*s.retry, s.c.opts.ReconnectMin), s.c.opts.ReconnectMax)
		wait = s.retry/2 + rand.N(s.retry/2+1)
		s.retryAt = time.Now().Add(wait)
	}
	s.detachLocked()
	s.mu.Unlock()
	if byNode {
		s.c.log.Info("the node ended a consumer's session; subscribing again", slog.String(logkey.Address, s.addr),
			slog.Any(logkey.Error, err), slog.Duration("retry_in", wait))
		s.c.wakePlace()
	}
}

// due reports whether the wait after the node ended a session is over.
func (s *subscription) due(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !now.Before(s.retryAt)
}

// endedByNode is the error of a subscription whose session the node ended
// with err. A denial stands even if the connection died after it: the
// node ends the consumers of an identity it revoked, with the reason, and
// then closes its connection, whose loss must not pass for a network
// failure that a reconnect would mend.
func (s *subscription) endedByNode(err error) error {
	return fmt.Errorf("consumer of %q ended by the node: %w: %w", s.addr, remoteErr(err), ErrClosed)
}

// take turns a Deliver into a Delivery and earns the node its credit
// back. A message that cannot be decoded can never be handled: it is
// rejected (dead-lettered at the node) and take returns nil.
func (s *subscription) take(sess *session.Session, gen uint64, d session.Deliver) *Delivery {
	s.mu.Lock()
	var grant uint32
	if s.sess == sess {
		s.retry = 0 // the session works
		if s.taken++; s.taken >= s.grantAt {
			grant, s.taken = s.taken, 0
		} else if !s.grantArmed && s.err == nil {
			s.grantArmed = true
			if s.grantTimer == nil {
				s.grantTimer = time.AfterFunc(grantDelay, s.grantTaken)
			} else {
				s.grantTimer.Reset(grantDelay)
			}
		}
	}
	s.mu.Unlock()
	if grant > 0 {
		_ = sess.Grant(grant) // fails only with the session, which ends it
	}
	m, err := message.Decode(d.Message, s.c.opts.Limits)
	if err != nil {
		s.c.log.Error("dead-letter undecodable message", slog.String(logkey.Address, s.addr), slog.Any(logkey.Error, err))
		_ = sess.Settle(session.SettleReject, []uint64{d.Tag}, err.Error())
		return nil
	}
	l := &remoteLease{s: s, tag: d.Tag, gen: gen, id: m.ID, attempt: int(d.Attempt)}
	return &Delivery{Message: m, Attempt: l.attempt, Reason: d.Reason, lease: l}
}

// grantDelay is how long the credit of a take waits for more takes to
// batch with.
const grantDelay = 20 * time.Millisecond

// grantTaken grants the credit of what was taken since the last grant
// (grantTimer).
func (s *subscription) grantTaken() {
	s.mu.Lock()
	s.grantArmed = false
	grant, sess := s.taken, s.sess
	if sess == nil || grant == 0 {
		s.mu.Unlock()
		return
	}
	s.taken = 0
	s.mu.Unlock()
	_ = sess.Grant(grant) // fails only with the session, which ends it
}

// remoteLease is a remote Delivery's lease: its tag in the subscription's
// session of generation gen, and whether it was settled.
type remoteLease struct {
	s        *subscription
	tag, gen uint64
	id       uint64 // the message's, for errors
	attempt  int
	settled  bool // under s.mu
}

func (l *remoteLease) Ack() error { return l.s.settle(l, session.SettleAck, "") }

func (l *remoteLease) Nack(reason string) error {
	return l.s.settle(l, session.SettleNack, reason)
}

// settle acks, nacks or releases l. An ack is queued for the flushLoop;
// the others are sent at once.
func (s *subscription) settle(l *remoteLease, op session.SettleOp, reason string) error {
	s.mu.Lock()
	switch {
	case s.err != nil:
		err := s.err
		s.mu.Unlock()
		return err
	case l.settled:
		s.mu.Unlock()
		return fmt.Errorf("message %d of %q, attempt %d: settled already: %w", l.id, s.addr, l.attempt, ErrLeaseLost)
	case l.gen != s.gen || s.sess == nil:
		s.mu.Unlock()
		return fmt.Errorf("message %d of %q, attempt %d: delivered before the connection to the node was lost, which gave it back: %w", l.id, s.addr, l.attempt, ErrLeaseLost)
	}
	l.settled = true
	sess := s.sess
	if op == session.SettleAck {
		s.acks = append(s.acks, l.tag)
		first := len(s.acks) == 1
		s.mu.Unlock()
		if first {
			s.c.wakeFlush()
		}
		return nil
	}
	s.mu.Unlock()
	return sess.Settle(op, []uint64{l.tag}, reason)
}

// flushAcks sends the acks queued since the last flush, in one Settle.
func (s *subscription) flushAcks() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	tags, sess := s.acks, s.sess
	if len(tags) == 0 || sess == nil {
		s.mu.Unlock()
		return
	}
	s.acks = s.spare[:0]
	s.mu.Unlock()
	_ = sess.Settle(session.SettleAck, tags, "") // fails only with the session, which gives the leases back
	s.mu.Lock()
	s.spare = tags[:0]
	s.mu.Unlock()
}

// close is Consumer.Close for a remote consumer: shutdown, with the close
// bounded by the session's handshake timeout.
func (s *subscription) close() {
	if sess := s.stop(); sess != nil {
		_ = sess.CloseWithin("consumer closed", 0)
	}
}

// host is the Client, which stops the consumer's listeners when it closes.
func (s *subscription) host() listenerHost { return s.c }

// shutdown ends the subscription: the acks queued are sent, then the
// session is closed, and the node gives back the leases of what it pushed
// and the application did not settle.
func (s *subscription) shutdown(ctx context.Context) {
	if sess := s.stop(); sess != nil {
		_ = sess.Close(ctx, "consumer closed")
	}
}

// stop sends the acks queued and ends the subscription, returning its
// session, if any, for the caller to close.
func (s *subscription) stop() *session.Session {
	s.flushAcks()
	return s.fail(fmt.Errorf("consumer of %q closed: %w", s.addr, ErrClosed))
}

// wakeFlush has the flushLoop send queued acks.
func (c *Client) wakeFlush() {
	select {
	case c.flush <- struct{}{}:
	default:
	}
}

// flushLoop sends the consumers' queued acks whenever some are queued.
// While it sends, more queue, so under load each Settle carries many.
func (c *Client) flushLoop() {
	var subs []*subscription
	for {
		select {
		case <-c.flush:
		case <-c.ctx.Done():
			return
		}
		c.mu.Lock()
		subs = subs[:0]
		for s := range c.subs {
			subs = append(subs, s)
		}
		c.mu.Unlock()
		for _, s := range subs {
			s.flushAcks()
		}
		clear(subs)
	}
}

// closeSession closes sess in order, bounded by timeout.
func closeSession(sess *session.Session, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = sess.Close(ctx, "not needed")
}
