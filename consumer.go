package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// Consumer takes messages from one receive address. Several consumers of
// one address compete: each message goes to one of them. Safe for
// concurrent use.
type Consumer struct {
	n    *Node
	q    *queue.Queue
	addr string
	sub  *subscription // a Client's consumer (see Dial); n and q are nil then
}

// Consumer returns a consumer of the local receive address addr (a bare
// name, or name@this-node).
func (n *Node) Consumer(addr string) (*Consumer, error) {
	name, node, err := message.ParseDestination(addr)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if node != "" && node != n.cfg.Name {
		return nil, fmt.Errorf("consumer of %q: node %q is not this node (%s): %w", addr, node, n.cfg.Name, ErrNotReceive)
	}
	q, err := n.receiveQueue(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Consumer{n: n, q: q, addr: name}, nil
}

// Address returns the address consumed.
func (c *Consumer) Address() string { return c.addr }

// Close stops the consumer. A local consumer holds nothing; a remote one
// sends its pending acks and gives the node back the messages it buffers
// but the application did not take. Deliveries taken and not settled are
// given back too: settling them afterwards returns ErrClosed. Close
// returns nil.
func (c *Consumer) Close() error {
	if c.sub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.sub.c.opts.HandshakeTimeout)
		defer cancel()
		c.sub.close(ctx)
	}
	return nil
}

// logger, track and untrack serve Listen for either kind of consumer.
func (c *Consumer) logger() *slog.Logger {
	if c.sub != nil {
		return c.sub.c.log
	}
	return c.n.log
}

// track registers a listener with the node or client, so that closing it
// stops the listener.
func (c *Consumer) track(l *Listener) error {
	if c.sub != nil {
		return c.sub.c.track(l)
	}
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	n.listeners[l] = struct{}{}
	return nil
}

func (c *Consumer) untrack(l *Listener) {
	if c.sub != nil {
		c.sub.c.untrack(l)
		return
	}
	c.n.mu.Lock()
	delete(c.n.listeners, l)
	c.n.mu.Unlock()
}

// Delivery is a message delivered under a lease. Ack it when handled, Nack
// it to have it redelivered after a backoff; if neither happens before the
// lease times out, it is delivered again.
type Delivery struct {
	*message.Message
	// Attempt is 1 on the first delivery.
	Attempt int
	// Reason says why the message was moved to this queue (dead letter,
	// expiry address); empty otherwise.
	Reason string
	d      *queue.Delivery

	// A remote delivery's lease (d is nil): its tag in the subscription's
	// session of generation gen, and whether it was settled.
	sub     *subscription
	tag     uint64
	gen     uint64
	settled bool
}

// Ack settles the delivery. The delete is group-committed without waiting:
// if the node crashes first, the message is delivered again.
//
// A remote delivery's ack is sent to the node in a batch, soon after: if
// the connection is lost first, the message is delivered again.
func (d *Delivery) Ack() error {
	if d.sub != nil {
		return d.sub.settle(d, session.SettleAck, "")
	}
	return d.d.Ack()
}

// Nack returns the message for redelivery after a backoff. Past the
// address's max_deliveries it goes to the dead-letter address with reason.
func (d *Delivery) Nack(reason string) error {
	if d.sub != nil {
		return d.sub.settle(d, session.SettleNack, reason)
	}
	return d.d.Nack(reason)
}

// Ack settles d; see Delivery.Ack.
func (c *Consumer) Ack(d *Delivery) error { return d.Ack() }

// Nack returns d for redelivery; see Delivery.Nack.
func (c *Consumer) Nack(d *Delivery, reason string) error { return d.Nack(reason) }

// Poll returns the next message if one is ready, or ErrNoMessage at once.
// A remote consumer's ready messages are those the node pushed already.
func (c *Consumer) Poll() (*Delivery, error) {
	if c.sub != nil {
		return c.sub.poll()
	}
	for {
		qd, err := c.q.Poll()
		if err != nil {
			return nil, err
		}
		if d := c.wrap(qd); d != nil {
			return d, nil
		}
	}
}

// Receive blocks until a message is ready or ctx ends.
func (c *Consumer) Receive(ctx context.Context) (*Delivery, error) {
	if c.sub != nil {
		return c.sub.receive(ctx)
	}
	for {
		qd, err := c.q.Receive(ctx)
		if err != nil {
			return nil, err
		}
		if d := c.wrap(qd); d != nil {
			return d, nil
		}
	}
}

// wrap decodes a delivery. A message that cannot be decoded can never be
// handled, so it goes to the dead-letter queue instead of looping.
func (c *Consumer) wrap(qd *queue.Delivery) *Delivery {
	m, err := qd.Message()
	if err != nil {
		if derr := qd.DeadLetter(err.Error()); derr != nil && !errors.Is(derr, ErrClosed) {
			c.n.log.Error("dead-letter undecodable message", slog.String(logAddress, c.addr), slog.Any(logError, derr))
		}
		return nil
	}
	return &Delivery{Message: m, Attempt: qd.Attempt, Reason: qd.Reason, d: qd}
}
