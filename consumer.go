package petrel

import (
	"context"
	"fmt"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Consumer takes messages from one receive address. Several consumers of
// one address compete: each message goes to one of them. Safe for
// concurrent use.
type Consumer struct {
	b    consumeBackend
	addr string
}

// Consumer returns a consumer of the local receive address addr (a bare
// name, or name@this-node). A name whose first word is "_petrel" is the
// node's own, refused with message.ErrDestination, but for its dead
// letters ("_petrel.topics.dlq").
func (n *Node) Consumer(addr string) (*Consumer, error) {
	q, err := n.consumerQueue(addr)
	if err != nil {
		return nil, err
	}
	return n.icpt.consumer(&Consumer{b: newQueueConsumer(n, q), addr: q.Name()})
}

// consumerQueue returns the receive queue of the local address addr, as
// a consumer of it takes from it.
func (n *Node) consumerQueue(addr string) (*queue.Queue, error) {
	name, node, err := message.ParseDestination(addr)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if node != "" && node != n.cfg.Name {
		return nil, fmt.Errorf("consumer of %q: node %q is not this node (%s): %w", addr, node, n.cfg.Name, ErrNotReceive)
	}
	// The dead letters of the node's own traffic ("_petrel.topics.dlq")
	// are for an operator to read; the rest is the node's to consume.
	if err := reservedName(name); err != nil && !queue.IsDeadLetter(name) {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	q, err := n.receiveQueue(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return q, nil
}

// Address returns the address consumed.
func (c *Consumer) Address() string { return c.addr }

// Close stops the consumer: a Receive or ReceiveBatch blocked in it
// returns an error wrapping ErrClosed, as do Poll, Receive, ReceiveBatch,
// PollBatch and Listen called afterwards, and its listeners stop taking
// messages. A remote consumer sends its pending acks first, and gives the
// node back the messages it buffers but the application did not take.
// Deliveries taken and not settled are given back too, at once, for other
// consumers to take, without counting as an attempt: settling them
// afterwards returns ErrClosed. Close returns nil.
func (c *Consumer) Close() error {
	c.b.close()
	return nil
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

	lease lease // the node's queue's, held by its consumer, or a Client's subscription's
}

// Ack settles the delivery. The delete is group-committed without waiting:
// if the node crashes first, the message is delivered again.
//
// A remote delivery's ack is sent to the node in a batch, soon after: if
// the connection is lost first, the message is delivered again.
func (d *Delivery) Ack() error { return d.lease.Ack() }

// Nack returns the message for redelivery after a backoff. Past the
// address's max_deliveries it goes to the dead-letter address with reason.
func (d *Delivery) Nack(reason string) error { return d.lease.Nack(reason) }

// Ack settles d; see Delivery.Ack.
func (c *Consumer) Ack(d *Delivery) error { return d.Ack() }

// Nack returns d for redelivery; see Delivery.Nack.
func (c *Consumer) Nack(d *Delivery, reason string) error { return d.Nack(reason) }

// Poll returns the next message if one is ready, or ErrNoMessage at once.
// A remote consumer's ready messages are those the node pushed already.
func (c *Consumer) Poll() (*Delivery, error) { return c.b.poll() }

// Receive blocks until a message is ready or ctx ends.
func (c *Consumer) Receive(ctx context.Context) (*Delivery, error) { return c.b.receive(ctx) }

// ReceiveBatch blocks until a message is ready or ctx ends, then returns
// the messages ready at that moment, up to max (at least one), without
// waiting for more: each is a Delivery to settle on its own, as if
// Receive had returned it. A consumer that keeps up with a busy address
// takes one message per call anyway; a batch saves the work each call
// costs besides its message, which a fan-out's consumers pay once per
// copy. A max below 1 counts as 1.
func (c *Consumer) ReceiveBatch(ctx context.Context, max int) ([]*Delivery, error) {
	if b, ok := c.b.(batchBackend); ok {
		return b.receiveBatch(ctx, max)
	}
	return receiveEach(c.b, ctx, max)
}

// PollBatch returns the messages ready now, up to max (at least one), or
// ErrNoMessage at once when there is none. A remote consumer's ready
// messages are those the node pushed already.
func (c *Consumer) PollBatch(max int) ([]*Delivery, error) {
	if b, ok := c.b.(batchBackend); ok {
		return b.pollBatch(max)
	}
	return pollEach(c.b, max)
}

// receiveEach is ReceiveBatch for a backend that takes one delivery at a
// time: a receive, then polls.
func receiveEach(b consumeBackend, ctx context.Context, max int) ([]*Delivery, error) {
	d, err := b.receive(ctx)
	if err != nil {
		return nil, err
	}
	return pollMore(b, []*Delivery{d}, max), nil
}

// pollEach is PollBatch for a backend that takes one delivery at a time.
func pollEach(b consumeBackend, max int) ([]*Delivery, error) {
	d, err := b.poll()
	if err != nil {
		return nil, err
	}
	return pollMore(b, []*Delivery{d}, max), nil
}

// pollMore appends to ds what b has ready, up to max in all. An error ends
// the batch: the next call meets it again, and ds stays the caller's to
// settle.
func pollMore(b consumeBackend, ds []*Delivery, max int) []*Delivery {
	for len(ds) < max {
		d, err := b.poll()
		if err != nil {
			break
		}
		ds = append(ds, d)
	}
	return ds
}
