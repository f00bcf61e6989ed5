package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// one queue of the node, each delivery leased by the queue itself. Closing
// it holds nothing back: what was taken and not settled stays leased until
// settled or its lease times out.
type queueConsumer struct {
	n *Node
	q *queue.Queue
}

func (c *queueConsumer) poll() (*Delivery, error) {
	for {
		qd, err := c.q.Poll()
		if err != nil {
			return nil, err
		}
		if d := newQueueDelivery(c.n.log, qd); d != nil {
			return d, nil
		}
	}
}

func (c *queueConsumer) receive(ctx context.Context) (*Delivery, error) {
	for {
		qd, err := c.q.Receive(ctx)
		if err != nil {
			return nil, err
		}
		if d := newQueueDelivery(c.n.log, qd); d != nil {
			return d, nil
		}
	}
}

func (c *queueConsumer) receiveBatch(ctx context.Context, max int) ([]*Delivery, error) {
	return c.batch(func() ([]*queue.Delivery, error) { return c.q.ReceiveBatch(ctx, nil, max) })
}

func (c *queueConsumer) pollBatch(max int) ([]*Delivery, error) {
	return c.batch(func() ([]*queue.Delivery, error) { return c.q.PollBatch(nil, max) })
}

// batch takes batches from the queue with take until one holds a message
// that decodes.
func (c *queueConsumer) batch(take func() ([]*queue.Delivery, error)) ([]*Delivery, error) {
	for {
		qds, err := take()
		if err != nil {
			return nil, err
		}
		if ds := newQueueDeliveries(c.n.log, qds); len(ds) > 0 {
			return ds, nil
		}
	}
}

func (c *queueConsumer) close()             {}
func (c *queueConsumer) host() listenerHost { return c.n }

// newQueueDelivery returns qd as a Delivery, or nil when its message
// cannot be decoded (see decodeOrDeadLetter). The Delivery and its
// Message are one allocation: a consumer of a topic's subscription makes
// one per copy.
func newQueueDelivery(log *slog.Logger, qd *queue.Delivery) *Delivery {
	dm := new(struct {
		d Delivery
		m message.Message
	})
	if err := qd.MessageTo(&dm.m); err != nil {
		deadLetterUndecodable(log, qd, err)
		return nil
	}
	dm.d = Delivery{Message: &dm.m, Attempt: qd.Attempt, Reason: qd.Reason, lease: qd}
	return &dm.d
}

// newQueueDeliveries is newQueueDelivery for a batch, in one allocation:
// the messages that did not decode are dead-lettered and left out.
func newQueueDeliveries(log *slog.Logger, qds []*queue.Delivery) []*Delivery {
	slab := make([]struct {
		d Delivery
		m message.Message
	}, len(qds))
	ds := make([]*Delivery, 0, len(qds))
	for i, qd := range qds {
		dm := &slab[i]
		if err := qd.MessageTo(&dm.m); err != nil {
			deadLetterUndecodable(log, qd, err)
			continue
		}
		dm.d = Delivery{Message: &dm.m, Attempt: qd.Attempt, Reason: qd.Reason, lease: qd}
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
