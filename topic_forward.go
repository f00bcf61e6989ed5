package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The receiving side of interest forwarding (see topic_interest.go):
// interest messages are applied by the topic inbox pump, and publishes get
// their copies for the next hops.

// errBadInterest is returned by parseInterest for an interest message
// that cannot be applied; the pump drops it, counted.
var errBadInterest = errors.New("malformed topic interest")

// interestMsg is an interest message's content.
type interestMsg struct {
	op, pattern, node string
	durable           bool
	hops              []string
	p                 address.Pattern
}

func parseInterest(m *message.Message) (interestMsg, error) {
	if m.Data.DataType != interestType {
		return interestMsg{}, fmt.Errorf("%w: data type %q", errBadInterest, m.Data.DataType)
	}
	str := func(k string) string { v, _ := m.Properties.Get(k); return v.Str() }
	d, _ := m.Properties.Get(propDurable)
	im := interestMsg{op: str(propOp), pattern: str(propPattern), node: str(propNode), durable: d.Bool(), hops: hopsOf(m)}
	if im.op != opSubscribe && im.op != opUnsub {
		return im, fmt.Errorf("%w: op %q", errBadInterest, im.op)
	}
	if message.ValidName(im.node) != nil || len(im.hops) == 0 {
		return im, fmt.Errorf("%w: node %q, hops %q", errBadInterest, im.node, strings.Join(im.hops, ","))
	}
	for _, h := range im.hops {
		if message.ValidName(h) != nil {
			return im, fmt.Errorf("%w: hop %q", errBadInterest, h)
		}
	}
	p, err := address.ParsePattern(im.pattern)
	if err != nil {
		return im, fmt.Errorf("%w: %w", errBadInterest, err)
	}
	im.p = p
	return im, nil
}

// applyInterest learns or forgets the interest m carries, persists the
// change and passes it on to the neighbours it has not crossed. What
// changes nothing (a repeated announcement) goes no further, which ends
// every flood; so do the hops and maxInterestHops.
func (n *Node) applyInterest(ctx context.Context, m *message.Message) error {
	im, err := parseInterest(m)
	if err != nil {
		n.topics.interestDropped.Add(1)
		n.log.Warn("dropping topic interest", slog.Any(logkey.Error, err))
		return nil
	}
	if err := n.interestFrom(im.hops[len(im.hops)-1], m); err != nil {
		n.topics.interestDropped.Add(1)
		n.log.Warn("dropping topic interest", slog.Any(logkey.Error, err))
		return nil
	}
	// Whatever becomes of it, the message shows its last hop reachable
	// now: the grace's clock for it starts again (topic_grace.go).
	n.topics.remote.hear(im.hops[len(im.hops)-1], n.now())
	self := n.cfg.Name
	if im.node == self || slices.Contains(im.hops, self) || len(im.hops) >= maxInterestHops {
		n.topics.interestDropped.Add(1)
		return nil
	}
	neighbour := im.hops[len(im.hops)-1]
	if im.op == opSubscribe {
		// The neighbour that hands the interest over must be allowed to
		// subscribe to its pattern: its access rules, not the subscribing
		// node's, which this node may not know. The message was acked on
		// its header already, so the refusal is logged and counted.
		if err := n.Authorize(neighbour, ActionSubscribe, im.pattern); err != nil {
			n.topics.interestDropped.Add(1)
			n.topics.interestDenied.Add(1)
			if held, ok := n.topics.deniedLog.Allow(neighbour); ok {
				n.log.Warn("refusing topic interest", slog.String("neighbour", neighbour), slog.String("node", im.node),
					slog.String("pattern", im.pattern), slog.Int64("suppressed", held), slog.Any(logkey.Error, err))
			}
			return nil
		}
	}
	it := &n.topics.remote
	it.changeMu.Lock()
	defer it.changeMu.Unlock()
	key := interestKey{neighbour, im.node, im.pattern}
	it.mu.Lock()
	old, had := it.learned[key]
	if im.op == opSubscribe && !had && len(it.learned) >= it.limit() {
		it.mu.Unlock()
		n.topics.interestDropped.Add(1)
		if held, ok := n.topics.fullLog.Allow(key.Neighbour); ok {
			n.log.Warn("dropping topic interest: the node keeps this much already", slog.String("neighbour", key.Neighbour),
				slog.String("node", im.node), slog.String("pattern", im.pattern), slog.Int("max", it.limit()), slog.Int64("suppressed", held))
		}
		return nil
	}
	var rec *interestRecord // nil: withdrawn
	if im.op == opSubscribe {
		rec = &interestRecord{Neighbour: key.Neighbour, Node: im.node, Pattern: im.pattern,
			Durable: im.durable, Hops: im.hops, pattern: im.p}
	}
	it.set(key, rec)
	it.hops.forget()
	it.mu.Unlock()
	// A subscribe for interest known already changes something only when
	// it changes its durability (the subscribing node's first durable
	// subscription to the pattern came, or its last went): that is
	// stored and passed on as well, since the grace drops only
	// non-durable interest, here and past this node.
	if had == (im.op == opSubscribe) && (!had || old.Durable == im.durable) {
		return nil
	}
	// The piece that changed, not all that is known: what one interest
	// message costs must not grow with what every neighbour announced.
	if err := n.saveInterest(ctx, key, rec); err != nil {
		return err
	}
	hops := append(slices.Clone(im.hops), self)
	if err := n.sendInterest(ctx, n.interestMessage(im.op, im.pattern, im.node, im.durable, hops), hops); err != nil {
		return err
	}
	if im.op == opUnsub {
		// What waits toward the neighbour for the interest withdrawn goes,
		// at the janitor's next prune of it (see wantPrune).
		n.wantPrune(key.Neighbour)
	}
	return nil
}

// nodeHops returns the nodes m crossed, as its hops property says, when
// a node wrote it: on a copy a neighbour forwarded (forwardPuts), which
// arrives over a link addressed to the topic alone. arrived tells whether
// m came out of the topic inbox rather than from a local producer.
//
// On any other message the property counts for nothing: it is the
// nodes' record, and hops an application set (by hand, or copied from a
// delivery it publishes again) would keep its message from the
// subscriptions behind the nodes they name, while the publish succeeded.
// An application's publish never looks like a forwarded copy: a remote
// client's publish to a topic of its node is stored naming that node
// (clientPublish), and what a producer or client sends to a topic of
// another node names that node, as every message that leaves a node does
// (nodePublisher.submit, route).
func nodeHops(m *message.Message, arrived bool) []string {
	if !arrived {
		return nil
	}
	if _, node, err := message.ParseDestination(m.Destination); err != nil || node != "" {
		return nil
	}
	return hopsOf(m)
}

// forwardPuts returns the puts of m's copies for the next hops whose
// interest matches topic: one per neighbour, whatever the number of
// subscriptions behind it, never to a node m crossed. hops are the nodes
// m crossed, as nodeHops read them. Each copy names the topic alone as
// destination and carries hops with this node added.
func (n *Node) forwardPuts(m *message.Message, topic string, hops []string) ([]queue.Put, error) {
	if len(hops) >= maxInterestHops {
		n.topics.interestDropped.Add(1)
		return nil, nil
	}
	self := n.cfg.Name
	next := n.topics.remote.nextHops(topic, append(slices.Clone(hops), self))
	if len(next) == 0 {
		return nil, nil
	}
	c := m.Clone()
	c.Destination = topic
	c.Properties.Set(propHops, message.String(strings.Join(append(slices.Clone(hops), self), ",")))
	data, err := c.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("forward %q: %w", topic, err)
	}
	// Past the bound the store drops the new copy (drop_new), or the
	// janitor the oldest (drop_oldest, trimForwards).
	bound := n.cfg.TopicForwardMaxQueued
	if n.forwardDropsOldest() {
		bound = 0
	}
	puts := make([]queue.Put, 0, len(next))
	for _, nb := range next {
		q, err := n.sendQueue(context.Background(), interestAddr, nb)
		if errors.Is(err, ErrNoRoute) {
			// Interest from a node that reaches this one, which cannot
			// reach it back: skipped, counted, so that publishes to the
			// others still work.
			n.topics.interestDropped.Add(1)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("forward %q to %s: %w", topic, nb, err)
		}
		b := data
		if len(puts) > 0 {
			b = append([]byte(nil), data...)
		}
		if bound > 0 {
			// Optional puts past the queue's depth bound are dropped and
			// counted (Queue.SetMaxDepth); interest messages, which are
			// not Optional, always go. A send queue dropped meanwhile
			// skips the copy too, as a subscription that ended does.
			q.SetMaxDepth(bound)
		}
		puts = append(puts, queue.Put{Queue: q, Msg: c, Data: b, Dedupe: true, Optional: bound > 0})
	}
	n.topics.forwarded.Add(int64(len(puts)))
	return puts, nil
}
