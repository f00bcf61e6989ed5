package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Publishing to a topic. A local Producer fans out in its own call: one
// put per matching subscription, submitted as one store operation, so
// that the copies commit together or not at all. A message for a topic
// that arrives from a link or a remote client goes first, with the
// custody any message has, to the topic inbox, a receive queue of its
// own; the inbox pump fans each out the same way and acks it only once
// its copies committed. A crash in between makes the pump fan it out
// again, and the copies' dedupe on (origin, id) keeps one of each.

// topicInbox names the inbox queue: ':' keeps it clear of addresses.
const topicInbox = "topic:inbox"

// inboxBatch caps the messages the pump fans out per round.
const inboxBatch = 256

// fanOut submits m's copies for the subscriptions its topic matches, and
// returns the operation, or nil when none matches: then m is counted as
// unrouted and dropped, as topic brokers do. dedupe is true for a message
// out of the topic inbox, the pump's own, false for a local producer's.
// mark, when not empty, is a meta key committed with the copies
// (queue.Store.SubmitMarked), or alone for an unrouted m.
func (n *Node) fanOut(m *message.Message, topic string, dedupe bool, mark string) (*queue.Op, error) {
	// A local publish (dedupe false: its id is new) has crossed no node,
	// whatever petrel.hops property its producer set; nor has a client's,
	// or any the inbox holds but a neighbour's forwarded copy (nodeHops).
	hops := nodeHops(m, dedupe)
	if slices.Contains(hops, n.cfg.Name) {
		// A copy whose hops name this node came back to a node it
		// visited, which fanned it out then: a neighbour with stale
		// routing metadata (no correct one sends a copy to a node in its
		// hops). Dropped, counted as the interest that loops back is
		// (applyInterest): neither delivered again, which the inbox's
		// dedupe would not catch for this node's own publishes (their
		// local copies never cross it) nor past its window, nor passed on.
		n.topics.interestDropped.Add(1)
		if mark != "" {
			return n.store.SubmitMeta(mark, []byte{})
		}
		return nil, nil
	}
	qs := n.topics.matching(topic)
	n.topics.published.Add(1)
	fwd, err := n.forwardPuts(m, topic, hops)
	if err != nil {
		return nil, err
	}
	// The forwarded copies carry their own hops. The local ones, kept ones
	// too, go to consumers without any: the property is the nodes', and a
	// consumer that publishes again what it received, its properties
	// copied, must not hand it back to them.
	m = withoutHops(m, dedupe)
	keep := n.topics.keepFor(topic)
	if len(qs) == 0 && len(fwd) == 0 && keep == nil {
		n.topics.unrouted.Add(1)
		if mark != "" {
			return n.store.SubmitMeta(mark, []byte{})
		}
		return nil, nil
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w", topic, err)
	}
	if len(qs) == 0 && len(fwd) == 0 {
		// Held for the durable subscriptions to come (topic_keep.go).
		op, err := n.store.SubmitMarked([]queue.Put{n.keepPut(keep, m, data, dedupe)}, mark, nil)
		if err != nil {
			return nil, fmt.Errorf("publish to %q: %w", topic, err)
		}
		n.kickKeeps()
		return op, nil
	}
	puts := make([]queue.Put, len(qs), len(qs)+len(fwd))
	for i, q := range qs {
		// Every copy has the same bytes, which the store then keeps once
		// (see queue's bodies and copies). Decode copies what it keeps,
		// so the consumers of the copies share nothing they may change.
		// Optional: a non-durable subscription that ends meanwhile is
		// skipped, as if it had ended before the publish.
		puts[i] = queue.Put{Queue: q, Msg: m, Data: data, Dedupe: dedupe, Optional: true}
	}
	// The copies for next hops commit with the local ones, all or none.
	op, err := n.store.SubmitMarked(append(puts, fwd...), mark, nil)
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w", topic, err)
	}
	if n.topics.anyOldest || len(fwd) > 0 && n.forwardDropsOldest() {
		n.kickKeeps() // a subscription or a send queue that drops its oldest may be past its bound
	}
	return op, nil
}

// withoutHops returns m without its hops property. A message out of the
// inbox (owned, decoded by the pump) loses it in place; a producer's own
// message is left as its caller made it, and a copy returned.
func withoutHops(m *message.Message, owned bool) *message.Message {
	if _, ok := m.Properties.Get(propHops); !ok {
		return m
	}
	if !owned {
		m = m.Clone()
	}
	m.Properties.Delete(propHops)
	return m
}

// publish is a local Producer's send to a topic; the Pending completes
// when every copy is durable, and mark with them (fanOut).
func (n *Node) publish(m *message.Message, topic, mark string) (completion, error) {
	if m.Kind == message.KindFile {
		return nil, fmt.Errorf("send to %q: %w; send the file to an address", topic, ErrFileToTopic)
	}
	op, err := n.fanOut(m, topic, false, mark)
	if err != nil {
		return nil, err
	}
	if op == nil {
		return failedSend{}, nil
	}
	return op, nil
}

// inbox returns the topic inbox, where topics' messages from links and
// clients wait for the pump.
func (n *Node) inbox(ctx context.Context) (*queue.Queue, error) {
	return n.store.Queue(ctx, topicInbox, queue.KindReceive)
}

// toTopic sends m as a publish when its destination is a topic of this
// node; ok is false, and nothing done, when it is not. m is stamped,
// passed to the interceptors and validated first, as any message.
func (p *nodePublisher) toTopic(ctx context.Context, m *message.Message) (c completion, ok bool, err error) {
	n := p.n
	topic := n.localTopic(m.Destination)
	if topic == "" {
		return nil, false, nil
	}
	if err := p.stamp(m); err != nil {
		return nil, true, err
	}
	if err := n.icpt.publishLocal(ctx, m); err != nil {
		return nil, true, err
	}
	if err := m.Validate(n.cfg.Limits); err != nil {
		return nil, true, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	c, err = n.publish(m, topic, "")
	return c, true, err
}

// startInbox starts the pump and the topic janitor (topic_grace.go);
// stopInbox stops them and waits. A node with
// no topic space has neither inbox nor pump: nothing can reach them.
func (n *Node) startInbox(ctx context.Context) error {
	if len(n.topics.spaces) == 0 {
		return nil
	}
	q, err := n.inbox(ctx)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.inboxStop, n.inboxDone = cancel, done
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		n.topicJanitor(pctx)
	}()
	go func() {
		defer close(done)
		n.inboxPump(pctx, q)
		<-janitorDone
	}()
	return nil
}

func (n *Node) stopInbox() {
	if n.inboxStop != nil {
		n.inboxStop()
		<-n.inboxDone
	}
}

// inboxPump fans out the inbox's messages until ctx ends or the store
// closes: it blocks for one, takes what else is ready, submits all their
// fan-outs so that they share group commits, then settles each.
func (n *Node) inboxPump(ctx context.Context, q *queue.Queue) {
	for {
		first, err := q.Receive(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
				n.log.Error("topic inbox stopped", slog.Any(logkey.Error, err))
			}
			return
		}
		batch := []*queue.Delivery{first}
		for len(batch) < inboxBatch {
			d, err := q.Poll()
			if err != nil {
				break
			}
			batch = append(batch, d)
		}
		n.fanOutInbox(batch)
	}
}

func (n *Node) fanOutInbox(batch []*queue.Delivery) {
	ops := make([]*queue.Op, len(batch))
	errs := make([]error, len(batch))
	ms := make([]*message.Message, len(batch))
	for i, d := range batch {
		m := decodeOrDeadLetter(n.log, d)
		if m == nil {
			batch[i] = nil
			continue
		}
		ms[i] = m
		name, _, _ := message.ParseDestination(m.Destination)
		if name == interestAddr {
			errs[i] = n.applyInterest(context.Background(), m)
			continue
		}
		ops[i], errs[i] = n.fanOut(m, name, true, "")
	}
	for i, d := range batch {
		if d == nil {
			continue
		}
		err := errs[i]
		if err == nil && ops[i] != nil {
			// Not ctx: a stopping pump still waits for what it submitted,
			// which the store commits or fails before it closes.
			err = ops[i].Wait(context.Background())
		}
		if err != nil {
			_ = d.Nack(err.Error())
			continue
		}
		if ops[i] != nil {
			n.retainArrived(ms[i])
		}
		_ = d.Ack()
	}
}
