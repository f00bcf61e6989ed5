package petrel

import (
	"context"
	"fmt"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Producer makes messages and sends them. It is cheap, and safe for
// concurrent use: one producer may keep thousands of sends in flight.
type Producer struct {
	n *Node
	r *publisher // a Client's producer (see Dial); n is nil then
}

// Producer returns a producer for this node.
func (n *Node) Producer() *Producer { return &Producer{n: n} }

// CreateCommandMessage returns a command message for addr with its header
// set: id, origin, destination, kind, default priority and timestamp.
func (p *Producer) CreateCommandMessage(addr string) *message.Message {
	return p.create(addr, message.KindCommand)
}

// CreateDataMessage returns a data message for addr with its header set.
func (p *Producer) CreateDataMessage(addr string) *message.Message {
	return p.create(addr, message.KindData)
}

// CreateFileMessage returns a file message for addr with its header set.
// Set File.SendFilePath to the file to send; Send fills in the rest of the
// file properties (filename, unless set, filesize, fileChecksum and the
// identifiers).
func (p *Producer) CreateFileMessage(addr string) *message.Message {
	return p.create(addr, message.KindFile)
}

func (p *Producer) create(addr string, kind message.Kind) *message.Message {
	if p.r != nil {
		return p.r.create(addr, kind)
	}
	m := &message.Message{
		Origin:      p.n.id,
		Destination: addr,
		Kind:        kind,
		Priority:    message.DefaultPriority,
		Timestamp:   p.n.now(),
	}
	// An id failure (the store could not persist the reservation) leaves
	// ID zero; Send tries again and reports the error.
	m.ID, _ = p.n.ids.Next()
	return m
}

func (n *Node) now() time.Time {
	if n.cfg.Store.Now != nil {
		return n.cfg.Store.Now()
	}
	return time.Now()
}

// Send stores m durably and returns once it is committed: with sync full,
// fsynced. A message for an address this node receives goes straight to
// its receive queue. If ctx ends first, Send returns ctx's error and the
// message may or may not have been stored.
//
// For a file message, Send first reads the file to describe it (SHA-256),
// then stores the file message: from then on the transfer is the node's,
// tracked in its store, and resumes after link cuts and restarts. The file
// must not change until it is sent; if it does, the transfer fails with
// the reason. A file for an address of this node is copied into its
// received folder before Send returns.
//
// Through a Client (see Dial), Send returns once the node has committed
// the message, and a refusal by the node wraps ErrRefused or ErrDenied. A
// client cannot send file messages.
func (p *Producer) Send(ctx context.Context, m *message.Message) error {
	if p.r != nil {
		return p.r.send(ctx, m)
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

// SendAsync submits m and returns at once with a handle that completes
// when m is durable or failed. Submission blocks only while the store's
// commit queue is full (back-pressure).
//
// A file message is described and stored before SendAsync returns, as by
// Send: reading the file is the slow part, and it cannot be done later.
//
// Through a Client, SendAsync blocks while DialOptions.Window sends are in
// flight, and the handle completes when the node confirms the message.
func (p *Producer) SendAsync(m *message.Message) *Pending {
	if p.r != nil {
		return p.r.sendAsync(m)
	}
	if m.Kind == message.KindFile {
		return failed(p.n.sendFile(context.Background(), m, false))
	}
	op, err := p.submit(context.Background(), m)
	if err != nil {
		return failed(err)
	}
	return &Pending{op: op}
}

func (p *Producer) submit(ctx context.Context, m *message.Message) (*queue.Op, error) {
	n := p.n
	if err := n.stamp(m); err != nil {
		return nil, err
	}
	if err := m.Validate(n.cfg.Limits); err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	q, dest, err := n.route(ctx, m.Destination)
	if err != nil {
		return nil, err
	}
	// A message leaving this node names its node, so that relays and the
	// destination read it the same way.
	m.Destination = dest
	op, err := n.store.Submit([]queue.Put{{Queue: q, Msg: m}})
	if err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	return op, nil
}

// stamp fills in what the header needs and the caller left out.
func (n *Node) stamp(m *message.Message) error {
	if m.ID == 0 {
		id, err := n.ids.Next()
		if err != nil {
			return fmt.Errorf("send: assign id: %w", err)
		}
		m.ID = id
	}
	if m.Origin.IsZero() {
		m.Origin = n.id
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = n.now()
	}
	return nil
}

// sendFile describes m's file, stores m and returns once it is durable.
// With dedupe, a send of the same (origin, id) that was stored already is
// a no-op: an outbox sends again what a crash may have interrupted.
func (n *Node) sendFile(ctx context.Context, m *message.Message, dedupe bool) error {
	if err := n.stamp(m); err != nil {
		return err
	}
	q, dest, err := n.route(ctx, m.Destination)
	if err != nil {
		return err
	}
	if err := n.prepareFile(ctx, m, dest); err != nil {
		return err
	}
	m.Destination = dest
	if err := m.Validate(n.cfg.Limits); err != nil {
		return fmt.Errorf("send file to %q: %w", m.Destination, err)
	}
	var local *filetransfer.Incoming
	if q.Kind() == queue.KindReceive {
		if local, err = n.deliverLocal(ctx, m, q); err != nil {
			return err
		}
		dedupe = true // the copy may be done again after a crash; the message must not
	}
	op, err := n.store.Submit([]queue.Put{{Queue: q, Msg: m, Dedupe: dedupe}})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		if local != nil {
			local.Close()
		}
		return fmt.Errorf("send file to %q: %w", m.Destination, err)
	}
	if local != nil {
		local.Finish()
		n.recordOutcome(m, "delivered", nil)
		n.notifyFile(m, nil)
	}
	return nil
}

// route returns the queue a message for dest goes to, and dest in full
// when it leaves this node. A bare name is local unless it is declared as
// a send address, which names its node.
func (n *Node) route(ctx context.Context, dest string) (*queue.Queue, string, error) {
	name, node, err := message.ParseDestination(dest)
	if err != nil {
		return nil, "", fmt.Errorf("send: %w", err)
	}
	if node == "" {
		n.mu.Lock()
		a, declared := n.addresses[name]
		n.mu.Unlock()
		if declared && a.Role == address.RoleSend {
			node = a.Node
		}
	}
	if node == "" || node == n.cfg.Name {
		q, err := n.receiveQueue(ctx, name)
		return q, dest, err
	}
	q, err := n.sendQueue(ctx, name, node)
	return q, message.JoinDestination(name, node), err
}

// Pending is the completion handle of SendAsync.
type Pending struct {
	op  *queue.Op
	r   *pubReq // a remote send's (see Dial)
	err error
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func failed(err error) *Pending { return &Pending{err: err} }

// Done is closed once the message is durable or the send failed.
func (p *Pending) Done() <-chan struct{} {
	if p.r != nil {
		return p.r.done
	}
	if p.op == nil {
		return closedCh
	}
	return p.op.Done()
}

// Err returns the send's error once Done is closed; nil before and on
// success.
func (p *Pending) Err() error {
	if p.r != nil {
		select {
		case <-p.r.done:
			return p.r.err
		default:
			return nil
		}
	}
	if p.op == nil {
		return p.err
	}
	return p.op.Err()
}

// Wait blocks until the send completes or ctx ends.
func (p *Pending) Wait(ctx context.Context) error {
	if p.r != nil {
		select {
		case <-p.r.done:
			return p.r.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.op == nil {
		return p.err
	}
	return p.op.Wait(ctx)
}
