package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// subscription serves one subscribe session: pushLoop leases the address's
// messages and delivers them as far as the client's credit allows;
// settleLoop acks, nacks, releases or dead-letters them as the client
// settles them. Each delivery carries a tag, the key of its lease here.
// When the session ends, every lease not settled is released: the messages
// go back to the queue at once, as a local consumer's would after their
// lease, without counting an attempt.
//
// Leases held are bounded by maxHeld in count, and in bytes by maxBytes
// (the sum of the held messages' sizes) and by the server's MaxHeld for
// every client subscription together: each lease keeps its message in
// memory. Under the bytes bounds the next message goes whatever its size,
// and a subscription that holds nothing always takes one, so a message
// larger than a bound still goes and every client gets its turn. A client
// that takes deliveries but never settles them stalls at a bound, until
// the leases time out in the queue (which delivers the messages again,
// here or elsewhere) and are forgotten here.
//
// A lease starts when the client's application takes the delivery, not
// when it is pushed: a delivery waiting in the client's buffer behind a
// slow handler must not time out unseen, be delivered again and be
// dead-lettered while the application acks it. So a pushed delivery is
// held (queue.Delivery.Hold) until the client grants the credit its take
// earns back, and its lease then runs LeaseTimeout from there
// (queue.Delivery.Touch). The client takes in push order and grants one
// credit per take, so the k-th credit granted past the initial window is
// the k-th delivery pushed (takenLoop). What the client has not taken is
// at most the window, and is given back when the session ends.
type subscription struct {
	s       *Server
	conn    *session.Conn
	sess    *session.Session
	peer    session.Peer
	topic   bool // sess.Address() is a topic pattern
	q       *queue.Queue
	log     *slog.Logger
	maxHeld int
	// maxBytes bounds heldBytes, the sum of the held messages' sizes.
	maxBytes int64
	stop     context.CancelFunc // ends pushLoop: the subscription was revoked
	done     chan struct{}      // closed once it ended and gave back its leases
	// ctx ends with the connection (cancel ends it sooner); pctx, the
	// push loop's, ends with it and with stop.
	ctx, pctx context.Context
	cancel    context.CancelFunc

	mu        sync.Mutex
	held      map[uint64]held // by tag
	heldBytes int64           // the sum of held's sizes
	tag       uint64          // the last tag given
	untaken   []uint64        // tags pushed, in order, the client has not taken yet
	owed      uint64          // credits granted that no pushed tag matched yet
	room      chan struct{}   // capacity 1: a lease was settled
	revoked   string          // why Rejudge ended it, if it did
}

// held is a lease a client holds.
type held struct {
	d    *queue.Delivery
	at   time.Time // when the client took it and its lease began; zero before
	size int64     // len(d.Data), counted in heldBytes
}

// newSubscription makes the subscription that will serve sess, a
// subscribe session for q, and registers it, before the session is
// accepted: a Rejudge from then on ends it with its reason, which the
// client reads, rather than closing a connection that seems to hold no
// subscription. gen is the count of Rejudge calls read before the
// subscription was admitted. serve or abandon must follow.
func (s *Server) newSubscription(c *session.Conn, sess *session.Session, q *queue.Queue, gen uint64) *subscription {
	ctx, cancel := s.ctxOf(c)
	_, topic := sess.Topic()
	sub := &subscription{
		s: s, conn: c, sess: sess, peer: c.Peer(), topic: topic, q: q,
		log:  s.log.With(slog.String(logkey.Peer, c.Peer().Name), slog.String(logkey.Address, q.Name())),
		held: map[uint64]held{}, room: make(chan struct{}, 1), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	// pushLoop blocks in the queue, which knows nothing of the session:
	// its context ends with the session, or when Rejudge revokes it.
	sub.pctx, sub.stop = s.readCtx(ctx)
	s.register(sub, gen)
	return sub
}

// abandon ends sub, whose session was never accepted.
func (sub *subscription) abandon() {
	sub.stop()
	sub.cancel()
	sub.s.unregister(sub)
}

// serve serves sub's session until it ends, the connection dies, the
// server stops or Rejudge revokes it.
func (sub *subscription) serve() {
	s, sess, ctx, pctx, pcancel := sub.s, sub.sess, sub.ctx, sub.pctx, sub.stop
	sub.maxHeld = 4 * int(sess.Window()) // the window the session was accepted with
	sub.maxBytes = s.maxSubscriptionHeld()
	defer sub.cancel()
	defer pcancel()
	defer s.unregister(sub)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-sess.Done():
			pcancel()
		case <-pctx.Done():
		}
	})
	wg.Go(func() { sub.settleLoop(ctx) })
	wg.Go(func() { sub.takenLoop(pctx) })
	err := sub.pushLoop(pctx)
	pcancel()
	if reason := sub.revokedReason(); reason != "" && ctx.Err() == nil && sess.Err() == nil {
		// The client is told why (its consumer ends with ErrDenied); the
		// settles it sent before it read that are still taken, and what
		// it holds is released below.
		sub.log.Warn("subscription revoked", slog.String(logkey.Reason, reason))
		sess.Abort(session.CodeDenied, reason)
	} else if s.draining() && ctx.Err() == nil && sess.Err() == nil {
		// Shutting down: what the client holds and did not settle is
		// released below, and delivered again after the restart.
		s.closeDrained(sess)
	}
	if err != nil && sess.Err() == nil && ctx.Err() == nil {
		// The queue failed (the store is closing): end the session, which
		// ends settleLoop once it took what the client settled.
		sub.log.Warn("subscription ended", slog.Any(logkey.Error, err))
		closeCtx, cc := context.WithTimeout(ctx, s.handshakeTimeout())
		sess.Close(closeCtx, err.Error())
		cc()
	}
	wg.Wait()
	sub.releaseAll()
}

// pushLoop delivers until ctx ends or the queue fails. For each credit it
// waits for a message, then delivers what else is ready at once, as far as
// the credit goes: the connection writes them in one batch.
func (sub *subscription) pushLoop(ctx context.Context) error {
	for {
		credit, err := sub.sess.WaitCredit(ctx)
		if err != nil {
			return nil // the session ended
		}
		if err := sub.waitRoom(ctx); err != nil {
			return nil
		}
		d, err := sub.q.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("lease from %s: %w", sub.q.Name(), err)
		}
		for n := uint32(1); ; n++ {
			if err := sub.push(ctx, d); err != nil {
				return nil // the session ended
			}
			if n >= credit || !sub.hasRoom() {
				break
			}
			if d, err = sub.q.Poll(); err != nil {
				break // none ready: wait for credit and a message again
			}
		}
	}
}

// push delivers d under a new tag, or releases it if that fails.
func (sub *subscription) push(ctx context.Context, d *queue.Delivery) error {
	data, ok := remaining(d)
	if !ok {
		// Expired since it was leased: the queue expires it on a later poll.
		d.Release()
		return nil
	}
	if ctx.Err() != nil {
		// Revoked (or ended) while d was leased: it goes back unseen.
		d.Release()
		return ctx.Err()
	}
	if sub.s.icpt != nil {
		data = sub.s.interceptDeliver(ctx, sub.peer, sub.q.Name(), data)
	}
	if err := d.Hold(); err != nil {
		return nil // timed out already: the queue delivers it again
	}
	sub.mu.Lock()
	sub.tag++
	tag := sub.tag
	size := int64(len(d.Data))
	sub.held[tag] = held{d: d, size: size}
	sub.heldBytes += size
	sub.untaken = append(sub.untaken, tag)
	touch := sub.matchLocked(nil)
	sub.mu.Unlock()
	touchAll(touch)
	sub.s.held.bytes.Add(size)
	sub.s.stats.Delivered.Add(1) // before the client can see it
	err := sub.sess.Deliver(ctx, session.Deliver{Tag: tag, Attempt: uint32(d.Attempt), Reason: d.Reason, Message: data})
	if err != nil {
		sub.s.stats.Delivered.Add(-1)
		if d := sub.take(tag); d != nil {
			d.Release()
		}
		return err
	}
	return nil
}

// remaining returns the encoded message with its TTL set to the time that
// remains, or false if none does.
func remaining(d *queue.Delivery) ([]byte, bool) {
	if d.ExpiresAt.IsZero() {
		return d.Data, true
	}
	left := time.Until(d.ExpiresAt)
	if left <= 0 {
		return nil, false
	}
	data := append([]byte(nil), d.Data...)
	if err := message.SetEncodedTTL(data, left); err != nil {
		return nil, false
	}
	return data, true
}

// Why a subscription may not take another lease, as roomState returns it.
const (
	roomFree  = iota
	roomCount // it holds maxHeld leases
	roomBytes // it holds maxBytes, or all together hold the server's MaxHeld
)

func (sub *subscription) hasRoom() bool { return sub.roomState() == roomFree }

// roomState says whether sub may take another lease: it holds fewer than
// maxHeld, and nothing, or less than maxBytes while all client
// subscriptions together hold less than the server's MaxHeld.
func (sub *subscription) roomState() int {
	sub.mu.Lock()
	n, b := len(sub.held), sub.heldBytes
	sub.mu.Unlock()
	switch {
	case n >= sub.maxHeld:
		return roomCount
	case n == 0:
		return roomFree
	case b >= sub.maxBytes || sub.s.held.bytes.Load() >= sub.s.maxHeld():
		return roomBytes
	}
	return roomFree
}

// waitRoom waits until sub may take another lease (see roomState). At a bound
// it forgets the leases that timed out in the queue meanwhile, and looks
// again every second (or sooner, when the client settles one). Each wait
// at a bound in bytes is counted once.
func (sub *subscription) waitRoom(ctx context.Context) error {
	var tick *time.Timer
	counted := false
	for {
		r := sub.roomState()
		if r == roomFree {
			return nil
		}
		if sub.forgetTimedOut() > 0 {
			continue
		}
		if r == roomBytes && !counted {
			counted = true
			sub.s.held.waits.Add(1)
		}
		if tick == nil {
			tick = time.NewTimer(time.Second)
			defer tick.Stop()
		} else {
			tick.Reset(time.Second)
		}
		select {
		case <-sub.room:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// takenLoop starts the leases of the deliveries the client takes, as it
// learns of them from the credits it grants, until ctx ends.
func (sub *subscription) takenLoop(ctx context.Context) {
	var seen uint64
	for {
		granted, err := sub.sess.WaitGranted(ctx, seen)
		if err != nil {
			return
		}
		sub.mu.Lock()
		sub.owed += granted - seen
		touch := sub.matchLocked(nil)
		sub.mu.Unlock()
		touchAll(touch)
		seen = granted
	}
}

// matchLocked matches the credits owed to the deliveries not taken, in
// push order: those are taken now. It returns the leases to start, of
// those still held (a settle may have beaten its credit here); sub.mu is
// held.
func (sub *subscription) matchLocked(touch []*queue.Delivery) []*queue.Delivery {
	now := time.Now()
	n := min(sub.owed, uint64(len(sub.untaken)))
	for _, tag := range sub.untaken[:n] {
		if h, ok := sub.held[tag]; ok {
			h.at = now
			sub.held[tag] = h
			touch = append(touch, h.d)
		}
	}
	sub.owed -= n
	sub.untaken = sub.untaken[n:]
	return touch
}

// touchAll starts the leases of ds: they time out LeaseTimeout from now.
// A lease settled meanwhile is skipped.
func touchAll(ds []*queue.Delivery) {
	for _, d := range ds {
		_ = d.Touch() // fails only for a lease settled or lost: nothing to start
	}
}

// forgetTimedOut drops the leases whose time ran out: the queue took the
// messages back. It returns how many it dropped. A lease the client has
// not taken yet is held, and does not run out.
func (sub *subscription) forgetTimedOut() int {
	timeout := sub.q.Policy().LeaseTimeout
	now := time.Now()
	sub.mu.Lock()
	defer sub.mu.Unlock()
	n := 0
	var freed int64
	for tag, h := range sub.held {
		if !h.at.IsZero() && now.Sub(h.at) > timeout {
			delete(sub.held, tag)
			freed += h.size
			n++
		}
	}
	sub.heldBytes -= freed
	sub.s.held.bytes.Add(-freed)
	return n
}

// take removes and returns the lease of tag, nil if there is none.
func (sub *subscription) take(tag uint64) *queue.Delivery {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	h, ok := sub.held[tag]
	if !ok {
		return nil
	}
	delete(sub.held, tag)
	sub.heldBytes -= h.size
	sub.s.held.bytes.Add(-h.size)
	select {
	case sub.room <- struct{}{}:
	default:
	}
	return h.d
}

// settleLoop applies the client's settles until the session ends (after
// the ones that arrived before) or ctx ends.
func (sub *subscription) settleLoop(ctx context.Context) {
	var batch []session.Settle
	var ds []*queue.Delivery
	for {
		var err error
		batch, err = sub.sess.WaitSettles(ctx, batch[:0])
		for _, st := range batch {
			ds = sub.settle(st, ds[:0])
		}
		clear(ds)
		if err != nil {
			return
		}
	}
}

// settle applies one Settle. The leases of tags not held (settled before,
// or timed out) are skipped. Acks go to the store as one request.
func (sub *subscription) settle(st session.Settle, ds []*queue.Delivery) []*queue.Delivery {
	for _, tag := range st.Tags {
		if d := sub.take(tag); d != nil {
			ds = append(ds, d)
		}
	}
	if st.Op == session.SettleAck {
		err := sub.q.AckAll(ds)
		sub.check(st.Op, err)
		if err == nil {
			sub.settled(st, ds)
		}
		return ds
	}
	for i, d := range ds {
		var err error
		switch st.Op {
		case session.SettleNack:
			err = d.Nack(st.Reason)
		case session.SettleRelease:
			err = d.Release()
		case session.SettleReject:
			err = d.DeadLetter("refused by client: " + st.Reason)
		}
		sub.check(st.Op, err)
		if err == nil {
			sub.settled(st, ds[i:i+1])
		}
	}
	return ds
}

// check logs a settle that failed for a reason other than a lease that
// timed out (the message was delivered again) or a store closing.
func (sub *subscription) check(op session.SettleOp, err error) {
	if err != nil && !errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, queue.ErrClosed) {
		sub.log.Warn("settle failed", slog.String("op", op.String()), slog.Any(logkey.Error, err))
	}
}

// releaseAll gives back every lease still held.
func (sub *subscription) releaseAll() {
	sub.mu.Lock()
	all, bytes := sub.held, sub.heldBytes
	sub.held, sub.heldBytes = map[uint64]held{}, 0
	sub.mu.Unlock()
	sub.s.held.bytes.Add(-bytes)
	for _, h := range all {
		sub.check(session.SettleRelease, h.d.Release())
	}
}
