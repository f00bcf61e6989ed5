package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Consumer takes messages from one receive address. Several consumers of
// one address compete: each message goes to one of them. Safe for
// concurrent use.
type Consumer struct {
	n    *Node
	q    *queue.Queue
	addr string
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
}

// Ack settles the delivery. The delete is group-committed without waiting:
// if the node crashes first, the message is delivered again.
func (d *Delivery) Ack() error { return d.d.Ack() }

// Nack returns the message for redelivery after a backoff. Past the
// address's max_deliveries it goes to the dead-letter address with reason.
func (d *Delivery) Nack(reason string) error { return d.d.Nack(reason) }

// Ack settles d; see Delivery.Ack.
func (c *Consumer) Ack(d *Delivery) error { return d.Ack() }

// Nack returns d for redelivery; see Delivery.Nack.
func (c *Consumer) Nack(d *Delivery, reason string) error { return d.Nack(reason) }

// Poll returns the next message if one is ready, or ErrNoMessage at once.
func (c *Consumer) Poll() (*Delivery, error) {
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
