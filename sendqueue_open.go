package petrel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Making a send queue is a commit of its own: its row must be durable
// before, or with, the first message put into it. A producer that waited
// for that commit on its first send to each new destination made one
// fsync per new send queue, one after the other: a thousand destinations
// cost a thousand commits in a row before the messages flowed.
//
// So a put into a send queue that does not exist yet does not wait for
// it. The queue is made by an opener goroutine, whose creation shares its
// commit with every other queue being made meanwhile (the writer groups
// what is waiting); the puts that arrive while it is made wait, in order,
// in the opener's list, and the opener submits them once the queue's row
// committed. So a message is never committed before its queue's row, and
// the messages of one producer into one queue keep their order: those
// submitted after the opener finished follow those it submitted.

// maxOpeningPuts bounds the puts one opening send queue holds. Past it,
// a producer waits for the queue to be made: back-pressure, as a full
// commit queue gives.
const maxOpeningPuts = 4096

// maxOpeners bounds the openers at work: past it, a send to yet another new
// destination waits for one to finish. A variable for the tests.
var maxOpeners = 1024

// openingSends are the send queues being made for puts that do not wait.
type openingSends struct {
	mu sync.Mutex
	m  map[string]*opening // by the send queue's name, name@node
	// entries is len(m), read without mu: while it is 0, no put waits
	// for any queue, so a send into a queue that exists goes straight to
	// the store without taking mu (see submitSend).
	entries atomic.Int32
	running int            // openers not yet ended
	peak    int            // most openers at once, for tests
	freed   chan struct{}  // closed when an opener ends; nil if no one waits
	closed  bool           // set at Close: no new opener starts
	wg      sync.WaitGroup // the openers
}

// opening is one send queue being made, and the puts waiting for it.
type opening struct {
	waiting []*deferredPut
	done    chan struct{} // closed once the opener submitted every put
}

// deferredPut is the completion of a put that waits for its send queue.
type deferredPut struct {
	put  queue.Put
	done chan struct{}
	err  error
}

func (d *deferredPut) Done() <-chan struct{} { return d.done }

func (d *deferredPut) Err() error {
	select {
	case <-d.done:
		return d.err
	default:
		return nil
	}
}

func (d *deferredPut) Wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *deferredPut) finish(err error) {
	d.err = err
	close(d.done)
}

// submitSend submits m, addressed in full to name@node on another node,
// into its send queue. When that queue must first be made, it returns at
// once (see the top of this file) unless maxOpeningPuts puts already wait
// for it.
func (n *Node) submitSend(ctx context.Context, m *message.Message, name, node string) (completion, error) {
	data, err := m.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	full := message.JoinDestination(name, node)
	// Checked before the send queue is looked up: one that exists may
	// have outlived its node's route (see sendQueue). nextHop keeps its
	// answers, so this costs no lock but for a node with no route.
	if !n.sendable(node) {
		return nil, fmt.Errorf("send to %s: node %q is neither a neighbour nor routed: %w", full, node, ErrNoRoute)
	}
	o := &n.opening
	if o.entries.Load() == 0 {
		// A put of this producer that waited for this queue was
		// submitted before its entry went: this one follows it.
		if q, ok := n.store.Lookup(full); ok && q.Kind() == queue.KindSend {
			return n.submitInto(q, node, m, data)
		}
	}
	for {
		o.mu.Lock()
		if op, ok := o.m[full]; ok {
			if len(op.waiting) >= maxOpeningPuts {
				o.mu.Unlock()
				select {
				case <-op.done:
					continue
				case <-ctx.Done():
					return nil, fmt.Errorf("send to %q: %w", m.Destination, ctx.Err())
				}
			}
			d := &deferredPut{put: queue.Put{Msg: m, Data: data}, done: make(chan struct{})}
			op.waiting = append(op.waiting, d)
			o.mu.Unlock()
			return d, nil
		}
		if q, ok := n.store.Lookup(full); ok || o.closed {
			// Made already (or closing: then sendQueue fails as it
			// should), and no opener holds puts for it.
			o.mu.Unlock()
			if !ok || q.Kind() != queue.KindSend {
				if q, err = n.sendQueue(ctx, name, node); err != nil {
					return nil, err
				}
			}
			return n.submitInto(q, node, m, data)
		}
		if o.running >= maxOpeners {
			if o.freed == nil {
				o.freed = make(chan struct{})
			}
			freed := o.freed
			o.mu.Unlock()
			select {
			case <-freed:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("send to %q: %w", m.Destination, ctx.Err())
			}
		}
		d := &deferredPut{put: queue.Put{Msg: m, Data: data}, done: make(chan struct{})}
		op := &opening{waiting: []*deferredPut{d}, done: make(chan struct{})}
		if o.m == nil {
			o.m = map[string]*opening{}
		}
		o.m[full] = op
		o.entries.Store(int32(len(o.m)))
		o.running++
		o.peak = max(o.peak, o.running)
		o.wg.Add(1)
		o.mu.Unlock()
		go n.openSendQueue(full, name, node, op)
		return d, nil
	}
}

// submitInto submits m, encoded as data, into the send queue q toward node.
func (n *Node) submitInto(q *queue.Queue, node string, m *message.Message, data []byte) (completion, error) {
	n.mgr.Ensure(q, node)
	op, err := n.store.Submit([]queue.Put{{Queue: q, Msg: m, Data: data}})
	if err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	return op, nil
}

// openSendQueue is the opener of one send queue: it makes the queue, then
// submits the puts waiting for it, in order, until none is left, and
// completes each once it committed.
func (n *Node) openSendQueue(full, name, node string, op *opening) {
	o := &n.opening
	defer o.wg.Done()
	defer n.openerEnded()
	q, qerr := n.sendQueue(context.Background(), name, node)
	var subs []*deferredPut
	var ops []*queue.Op
	for {
		o.mu.Lock()
		batch := op.waiting
		op.waiting = nil
		if len(batch) == 0 {
			delete(o.m, full)
			o.entries.Store(int32(len(o.m)))
			close(op.done)
			o.mu.Unlock()
			break
		}
		o.mu.Unlock()
		for _, d := range batch {
			if qerr != nil {
				d.finish(qerr)
				continue
			}
			d.put.Queue = q
			sop, err := n.store.Submit([]queue.Put{d.put})
			if err != nil {
				d.finish(fmt.Errorf("send to %q: %w", full, err))
				continue
			}
			subs, ops = append(subs, d), append(ops, sop)
		}
		subs, ops = finishCommitted(subs, ops)
	}
	// Every put is submitted: the ones that follow go straight to the
	// store. The store finishes every submitted op by the time it closes,
	// so this wait ends.
	for i, d := range subs {
		<-ops[i].Done()
		d.finish(ops[i].Err())
	}
}

// openerEnded frees an opener's place, and wakes the sends waiting for one.
func (n *Node) openerEnded() {
	o := &n.opening
	o.mu.Lock()
	o.running--
	if o.freed != nil {
		close(o.freed)
		o.freed = nil
	}
	o.mu.Unlock()
}

// finishCommitted completes the leading puts whose ops finished, so that
// their producers need not wait for the opener's last submit, and returns
// the rest.
func finishCommitted(subs []*deferredPut, ops []*queue.Op) ([]*deferredPut, []*queue.Op) {
	i := 0
	for ; i < len(subs); i++ {
		select {
		case <-ops[i].Done():
			subs[i].finish(ops[i].Err())
			continue
		default:
		}
		break
	}
	return subs[i:], ops[i:]
}

// closeOpeners stops new openers and waits for the running ones. It runs
// once the store is closed, so every op they wait for has finished.
func (n *Node) closeOpeners() {
	n.opening.mu.Lock()
	n.opening.closed = true
	n.opening.mu.Unlock()
	n.opening.wg.Wait()
}
