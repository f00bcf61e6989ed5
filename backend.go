package petrel

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// A Producer and a Consumer do the same whatever they produce to or
// consume from. What differs sits behind one backend per side:
//
//	            Producer              Consumer
//	embedded    nodePublisher         queueConsumer   (backend_local.go)
//	remote      publisher             subscription    (client_publish.go, client_subscribe.go)
//
// A new way in (a topic subscription, an MQTT session) is one more
// implementation of these interfaces, not one more branch in every method.

var (
	_ publishBackend = (*nodePublisher)(nil)
	_ publishBackend = (*publisher)(nil)
	_ consumeBackend = (*queueConsumer)(nil)
	_ consumeBackend = (*subscription)(nil)
	_ batchBackend   = (*queueConsumer)(nil)
	_ listenerHost   = (*Node)(nil)
	_ listenerHost   = (*Client)(nil)
	_ lease          = (*localLease)(nil)
	_ lease          = (*remoteLease)(nil)
	_ completion     = (*queue.Op)(nil)
	_ completion     = (*pubReq)(nil)
	_ completion     = failedSend{}
)

// publishBackend is where a Producer's messages go: the store of the
// embedded node, or the node a Client is connected to.
//
// Every method is safe to call concurrently, from any number of
// goroutines. send blocks until the message is durable at the node or
// failed, or until ctx ends (the message may then be stored or not).
// sendAsync blocks only for back-pressure (a full commit queue, a full
// publish window) and, for a file message, to read the file; the Done
// channel of the Pending it returns is closed once, when the message is
// durable or failed. An endpoint that closes fails what it cannot finish,
// so no Done channel stays open past its Close. Both stamp the message
// first (see stamper): a message built by hand gets the same header as one
// from create.
type publishBackend interface {
	// create returns a message for addr with its header set.
	create(addr string, kind message.Kind) *message.Message
	send(ctx context.Context, m *message.Message) error
	sendAsync(m *message.Message) *Pending
}

// consumeBackend is where a Consumer's deliveries come from: a queue of the
// embedded node, or a subscription at the node a Client is connected to.
// A topic subscription plugs in the same way: one more consumeBackend, or
// a queueConsumer over a queue of its own.
//
// poll, receive, and settling the deliveries they return are safe to call
// concurrently, from any number of goroutines: each delivery goes to one
// caller, leased to it until settled, given back or timed out. There are
// no channels to drain: receive blocks until a delivery is ready or ctx
// ends, poll returns ErrNoMessage instead of waiting. Once the endpoint has
// closed, both return an error wrapping ErrClosed; so do they once the
// backend is closed itself, and closed returns that error (nil before).
// close may be called more than once (Consumer.Close); it has a receive
// blocked in the backend return, gives back what the backend buffers and
// the deliveries taken and not settled, whose settling then returns the
// closed error, and returns, bounded by the endpoint's handshake timeout.
type consumeBackend interface {
	poll() (*Delivery, error)
	receive(ctx context.Context) (*Delivery, error)
	close()
	closed() error
	// host is the endpoint that stops the consumer's listeners when it
	// closes.
	host() listenerHost
}

// batchBackend is a consumeBackend that takes a batch of deliveries at a
// lower cost than one at a time. Consumer.ReceiveBatch falls back on
// receive and poll for the others.
type batchBackend interface {
	receiveBatch(ctx context.Context, max int) ([]*Delivery, error)
	pollBatch(max int) ([]*Delivery, error)
}

// listenerHost is an endpoint (a Node or a Client) as a Listener sees it:
// it stops the listeners it tracks when it closes, and logs for them.
// Safe for concurrent use; track fails with ErrClosed once the endpoint
// has begun to close.
type listenerHost interface {
	track(l *Listener) error
	untrack(l *Listener)
	logger() *slog.Logger
}

// lease is a delivery's hold on its message: a localLease (the queue's
// lease, held by its consumer) for the embedded node, a remoteLease for a
// Client. Ack and Nack may be called from any goroutine; the first
// settles the delivery, a second is an error.
type lease interface {
	Ack() error
	Nack(reason string) error
}

// completion is what a Pending waits on: a *queue.Op for the embedded
// node, a *pubReq for a Client, a failedSend for a message refused before
// it was submitted. Done is closed once, when the send is durable or
// failed; Err is nil before that. Safe to wait on from several goroutines.
type completion interface {
	Done() <-chan struct{}
	Err() error
	Wait(ctx context.Context) error
}

// failedSend is the completion of a send that failed before submission.
type failedSend struct{ err error }

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (f failedSend) Done() <-chan struct{}      { return closedCh }
func (f failedSend) Err() error                 { return f.err }
func (f failedSend) Wait(context.Context) error { return f.err }
func failed(err error) *Pending                 { return &Pending{c: failedSend{err}} }

// stamper fills in the header of the messages one endpoint makes: the one
// place where ids, origins, timestamps and defaults are set. A node stamps
// with its store's clock (Config.Store.Now), a Client with time.Now; ids
// come from the same clock.
type stamper struct {
	origin message.NodeID
	ids    *message.IDGen
	now    func() time.Time
}

// create returns a message for addr with its header set: id, origin,
// destination, kind, default priority and timestamp. An id failure (the
// node could not persist the id reservation) leaves ID zero; the send
// stamps again and reports the error.
func (s stamper) create(addr string, kind message.Kind) *message.Message {
	m := &message.Message{Destination: addr, Kind: kind, Priority: message.DefaultPriority}
	_ = s.stamp(m)
	return m
}

// stamp fills in what the header needs and the caller left out.
func (s stamper) stamp(m *message.Message) error {
	if m.Origin.IsZero() {
		m.Origin = s.origin
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = s.now()
	}
	if m.ID == 0 {
		id, err := s.ids.Next()
		if err != nil {
			return fmt.Errorf("send: assign id: %w", err)
		}
		m.ID = id
	}
	return nil
}
