package petrel

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
)

// This file holds the embedded node's backends: a Producer of a Node sends
// into its store, a Consumer of a Node takes from one of its queues.

// now is the node's clock: its store's, so that ids, timestamps, expiry
// and leases agree.
func (n *Node) now() time.Time {
	if n.cfg.Store.Now != nil {
		return n.cfg.Store.Now()
	}
	return time.Now()
}

// stamper stamps the messages this node makes.
func (n *Node) stamper() stamper { return stamper{origin: n.id, ids: n.ids, now: n.now} }

// nodePublisher is the publishBackend of a Node's Producer.
type nodePublisher struct {
	stamper // create
	n       *Node
}

func (p *nodePublisher) send(ctx context.Context, m *message.Message) error {
	if c, ok, err := p.toTopic(ctx, m); ok {
		if err != nil {
			return err
		}
		return c.Wait(ctx)
	}
	if m.Kind == message.KindFile {
		return p.n.sendFile(ctx, m, false)
	}
	op, err := p.submit(ctx, m)
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

func (p *nodePublisher) sendAsync(m *message.Message) *Pending {
	if c, ok, err := p.toTopic(context.Background(), m); ok {
		if err != nil {
			return failed(err)
		}
		return &Pending{c: c}
	}
	if m.Kind == message.KindFile {
		return failed(p.n.sendFile(context.Background(), m, false))
	}
	op, err := p.submit(context.Background(), m)
	if err != nil {
		return failed(err)
	}
	return &Pending{c: op}
}

func (p *nodePublisher) submit(ctx context.Context, m *message.Message) (completion, error) {
	n := p.n
	if err := n.reservedDest(m.Destination); err != nil {
		return nil, err
	}
	if err := p.stamp(m); err != nil {
		return nil, err
	}
	if err := n.icpt.publishLocal(ctx, m); err != nil {
		return nil, err
	}
	if err := m.Validate(n.cfg.Limits); err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	if name, node, err := n.resolve(m.Destination); err == nil && node != "" && node != n.cfg.Name {
		// A message leaving this node names its node, so that relays and
		// the destination read it the same way.
		m.Destination = message.JoinDestination(name, node)
		return n.submitSend(ctx, m, name, node)
	}
	q, dest, err := n.route(ctx, m.Destination)
	if err != nil {
		return nil, err
	}
	m.Destination = dest
	op, err := n.store.Submit([]queue.Put{{Queue: q, Msg: m}})
	if err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	return op, nil
}

// queueConsumer is the consumeBackend of a Node's Consumer: it takes from
// one queue of the node, each delivery leased by the queue itself. It
// keeps the leases it handed out and that are not settled, so that close
// gives them back at once, as the node does for a remote consumer that
// closes, and settling them afterwards returns its error, which wraps
// ErrClosed. Once closed it takes nothing more: a receive blocked in it
// returns that error.
type queueConsumer struct {
	n *Node
	q *queue.Queue
	// keep leaves what was taken leased at close, to be settled
	// afterwards, and tracks nothing: the MQTT gateway completes what a
	// client has in flight after it unsubscribed (MQTT-3.10.4-3), and
	// gives back itself what a closed connection had.
	keep bool

	ctx    context.Context // ends with close: a receive waits on it too
	cancel context.CancelFunc

	mu      sync.Mutex
	err     error       // why the consumer is closed; nil while open
	held    *localLease // the leases taken and not settled, oldest first
	last    *localLease
	count   int // len(held)
	pruneAt int // count at which held is pruned (see pruneLocked)
}

func newQueueConsumer(n *Node, q *queue.Queue) *queueConsumer {
	ctx, cancel := context.WithCancel(context.Background())
	return &queueConsumer{n: n, q: q, ctx: ctx, cancel: cancel, pruneAt: minPrune}
}

// minPrune is the fewest leases a consumer holds before it looks for
// those that timed out (see pruneLocked).
const minPrune = 256

func (c *queueConsumer) poll() (*Delivery, error) {
	for {
		if err := c.closed(); err != nil {
			return nil, err
		}
		qd, err := c.q.Poll()
		if err != nil {
			return nil, err
		}
		if d, err := c.deliver(qd); d != nil || err != nil {
			return d, err
		}
	}
}

func (c *queueConsumer) receive(ctx context.Context) (*Delivery, error) {
	for {
		if err := c.closed(); err != nil {
			return nil, err
		}
		qd, err := c.q.Poll()
		if errors.Is(err, ErrNoMessage) {
			qd, err = waitOn(c, ctx, c.q.Receive)
		}
		if err != nil {
			return nil, err
		}
		if d, err := c.deliver(qd); d != nil || err != nil {
			return d, err
		}
	}
}

func (c *queueConsumer) receiveBatch(ctx context.Context, max int) ([]*Delivery, error) {
	return c.batch(func() ([]*queue.Delivery, error) {
		qds, err := c.q.PollBatch(nil, max)
		if errors.Is(err, ErrNoMessage) {
			qds, err = waitOn(c, ctx, func(ctx context.Context) ([]*queue.Delivery, error) {
				return c.q.ReceiveBatch(ctx, nil, max)
			})
		}
		return qds, err
	})
}

func (c *queueConsumer) pollBatch(max int) ([]*Delivery, error) {
	return c.batch(func() ([]*queue.Delivery, error) { return c.q.PollBatch(nil, max) })
}

// batch takes batches from the queue with take until one holds a message
// that decodes.
func (c *queueConsumer) batch(take func() ([]*queue.Delivery, error)) ([]*Delivery, error) {
	for {
		if err := c.closed(); err != nil {
			return nil, err
		}
		qds, err := take()
		if err != nil {
			return nil, err
		}
		ds := newQueueDeliveries(c.n.log, qds)
		if len(ds) == 0 {
			continue
		}
		if err := c.hold(ds); err != nil {
			return nil, err
		}
		return ds, nil
	}
}

// waitOn runs wait, which blocks on the queue, under a context that ends
// with ctx or with the consumer: a receive blocked when the consumer
// closes returns the consumer's error. The queue is polled before, so
// that a consumer that keeps up pays for no context of its own.
func waitOn[T any](c *queueConsumer, ctx context.Context, wait func(context.Context) (T, error)) (T, error) {
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	v, err := wait(wctx)
	stop()
	cancel()
	if err != nil {
		if cerr := c.closed(); cerr != nil {
			return v, cerr
		}
	}
	return v, err
}

// deliver returns qd as a Delivery held by the consumer, nil when its
// message cannot be decoded (see newQueueDelivery), or the consumer's
// error if it closed meanwhile.
func (c *queueConsumer) deliver(qd *queue.Delivery) (*Delivery, error) {
	d := newQueueDelivery(c.n.log, qd)
	if d == nil {
		return nil, nil
	}
	if err := c.hold([]*Delivery{d}); err != nil {
		return nil, err
	}
	return d, nil
}

// closed returns the consumer's error once it closed, nil before.
func (c *queueConsumer) closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// hold tracks the leases of ds, just taken from the queue, until they are
// settled. If the consumer closed meanwhile, it gives them back at once
// and returns the consumer's error: a closed consumer hands out nothing.
func (c *queueConsumer) hold(ds []*Delivery) error {
	var now int64
	if !c.keep {
		now = c.n.now().UnixNano()
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		for _, d := range ds {
			_ = d.lease.(*localLease).qd.Release()
		}
		return err
	}
	if c.keep {
		c.mu.Unlock()
		return nil
	}
	for _, d := range ds {
		l := d.lease.(*localLease)
		l.c, l.at, l.held = c, now, true
		l.prev = c.last
		if c.last != nil {
			c.last.next = l
		} else {
			c.held = l
		}
		c.last = l
	}
	c.count += len(ds)
	if c.count >= c.pruneAt {
		c.pruneLocked(now)
	}
	c.mu.Unlock()
	return nil
}

// pruneLocked forgets the oldest leases held whose lease timeout passed:
// the queue takes those messages back itself, and a caller that never
// settles what it takes must not make the consumer hold more and more.
// It then waits until the consumer holds twice as many as it kept, so
// that pruning costs each lease a constant share.
func (c *queueConsumer) pruneLocked(now int64) {
	timeout := int64(c.q.Policy().LeaseTimeout)
	for l := c.held; l != nil && now-l.at > timeout; l = c.held {
		c.unlinkLocked(l)
	}
	c.pruneAt = max(minPrune, 2*c.count)
}

func (c *queueConsumer) unlinkLocked(l *localLease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		c.held = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		c.last = l.prev
	}
	l.prev, l.next, l.held = nil, nil, false
	c.count--
}

// settle lets l be settled, and forgets it: its settle is the caller's
// now, and close gives back only what is still held. Once the consumer
// closed it returns the consumer's error.
func (c *queueConsumer) settle(l *localLease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if l.held {
		c.unlinkLocked(l)
	}
	return nil
}

// close stops the consumer: a receive blocked in it returns, and the
// deliveries it handed out and that are not settled go back to the queue
// at once, without counting an attempt, as a remote consumer's do.
func (c *queueConsumer) close() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("consumer of %q closed: %w", c.q.Name(), ErrClosed)
	held := c.held
	c.held, c.last, c.count = nil, nil, 0
	for l := held; l != nil; l = l.next {
		l.held = false
	}
	c.mu.Unlock()
	c.cancel()
	for l := held; l != nil; l = l.next {
		// A lease lost (timed out, and delivered again) is not this
		// consumer's to give back.
		_ = l.qd.Release()
	}
}

func (c *queueConsumer) host() listenerHost { return c.n }

// localLease is the lease of a delivery a local consumer handed out: the
// queue's, held by the consumer until it is settled (see queueConsumer).
type localLease struct {
	qd         *queue.Delivery
	c          *queueConsumer
	at         int64 // when it was taken, unix nanos by the node's clock
	prev, next *localLease
	held       bool // in c's list; under c.mu
}

func (l *localLease) Ack() error {
	if l.c != nil {
		if err := l.c.settle(l); err != nil {
			return err
		}
	}
	return l.qd.Ack()
}

func (l *localLease) Nack(reason string) error {
	if l.c != nil {
		if err := l.c.settle(l); err != nil {
			return err
		}
	}
	return l.qd.Nack(reason)
}

// newQueueDelivery returns qd as a Delivery, or nil when its message
// cannot be decoded (see decodeOrDeadLetter). The Delivery and its
// Message are one allocation, with its lease: a consumer of a topic's
// subscription makes one per copy.
func newQueueDelivery(log *slog.Logger, qd *queue.Delivery) *Delivery {
	dm := new(struct {
		d Delivery
		m message.Message
		l localLease
	})
	if err := qd.MessageTo(&dm.m); err != nil {
		deadLetterUndecodable(log, qd, err)
		return nil
	}
	dm.l.qd = qd
	dm.d = Delivery{Message: &dm.m, Attempt: qd.Attempt, Reason: qd.Reason, lease: &dm.l}
	return &dm.d
}

// newQueueDeliveries is newQueueDelivery for a batch, in one allocation:
// the messages that did not decode are dead-lettered and left out.
func newQueueDeliveries(log *slog.Logger, qds []*queue.Delivery) []*Delivery {
	slab := make([]struct {
		d Delivery
		m message.Message
		l localLease
	}, len(qds))
	ds := make([]*Delivery, 0, len(qds))
	for i, qd := range qds {
		dm := &slab[i]
		if err := qd.MessageTo(&dm.m); err != nil {
			deadLetterUndecodable(log, qd, err)
			continue
		}
		dm.l.qd = qd
		dm.d = Delivery{Message: &dm.m, Attempt: qd.Attempt, Reason: qd.Reason, lease: &dm.l}
		ds = append(ds, &dm.d)
	}
	return ds
}

// decodeOrDeadLetter returns qd's message. A message that cannot be
// decoded can never be handled, so it goes to the dead-letter queue
// instead of looping, and decodeOrDeadLetter returns nil.
func decodeOrDeadLetter(log *slog.Logger, qd *queue.Delivery) *message.Message {
	m, err := qd.Message()
	if err == nil {
		return m
	}
	deadLetterUndecodable(log, qd, err)
	return nil
}

// deadLetterUndecodable moves qd, whose message did not decode (err), to
// the dead-letter queue.
func deadLetterUndecodable(log *slog.Logger, qd *queue.Delivery, err error) {
	if derr := qd.DeadLetter(err.Error()); derr != nil && !errors.Is(derr, ErrClosed) {
		log.Error("dead-letter undecodable message", slog.String(logkey.Address, qd.Queue().Name()), slog.Any(logkey.Error, derr))
	}
}

// track registers a listener, so that closing the node stops it.
func (n *Node) track(l *Listener) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	n.listeners[l] = struct{}{}
	return nil
}

func (n *Node) untrack(l *Listener) {
	n.mu.Lock()
	delete(n.listeners, l)
	n.mu.Unlock()
}

func (n *Node) logger() *slog.Logger { return n.log }
