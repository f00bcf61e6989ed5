package petrel

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// trimSubscriptions brings every subscription whose space drops its
// oldest (TopicConfig.Overflow drop_oldest) back to its bound: it deletes
// the oldest messages no consumer holds, counted into the subscription
// queue's Overflowed. The topic janitor runs it after the publishes that
// may have passed a bound (kickKeeps) and at every tick. A subscription
// whose messages past its bound are all in flight stays above it until
// they are settled.
func (n *Node) trimSubscriptions(ctx context.Context) {
	t := n.topics
	if !t.anyOldest {
		return
	}
	t.mu.RLock()
	var due []*subEntry
	for _, e := range t.subs {
		if e.dropOldest && e.bound > 0 && e.q.Stats().Depth > e.bound {
			due = append(due, e)
		}
	}
	t.mu.RUnlock()
	for _, e := range due {
		if err := trimOldest(ctx, e.q, e.bound, e.q.OldestFree); err != nil && ctx.Err() == nil {
			n.log.Warn("drop a subscription's oldest messages past its bound; tried again at the next publish or tick",
				slog.String("subscription", e.name), slog.Any(logkey.Error, err))
		}
	}
}

// trimOldest deletes q's oldest rows that oldest picks, pruneBatch at a
// time, counted into its Overflowed, until q holds bound or oldest finds
// none to drop (what is left over is in flight, or kept).
func trimOldest(ctx context.Context, q *queue.Queue, bound int64, oldest func(context.Context, int) ([]queue.Browsed, error)) error {
	for {
		over := q.Stats().Depth - bound
		if over <= 0 {
			return nil
		}
		rows, err := oldest(ctx, int(min(over, pruneBatch)))
		if err != nil || len(rows) == 0 {
			return err
		}
		dropped, err := q.DeleteOverflowed(ctx, rows)
		if err != nil || dropped == 0 {
			return err // gone already
		}
	}
}

// forwardDropsOldest reports whether the send queues toward neighbours
// for topic traffic keep their latest publishes past
// Config.TopicForwardMaxQueued (drop_oldest).
func (n *Node) forwardDropsOldest() bool {
	return n.cfg.TopicForwardMaxQueued > 0 && n.cfg.TopicForwardOverflow == overflowDropOldest
}

// trimForwards brings each send queue toward a neighbour for topic
// traffic back to Config.TopicForwardMaxQueued when it drops its oldest:
// it deletes the oldest publishes not in flight, counted into the queue's
// Overflowed. Interest messages stay whatever their age: dropping one
// would leave the neighbour without interest it should have learned.
func (n *Node) trimForwards(ctx context.Context) {
	if !n.forwardDropsOldest() {
		return
	}
	bound := n.cfg.TopicForwardMaxQueued
	for _, f := range n.forwardQueues() {
		if err := trimOldest(ctx, f.q, bound, func(ctx context.Context, n int) ([]queue.Browsed, error) { return oldestPublishes(ctx, f.q, n) }); err != nil && ctx.Err() == nil {
			n.log.Warn("drop the oldest publishes waiting toward a neighbour past topic_forward_max_queued; tried again at the next publish or tick",
				slog.String(logkey.Queue, f.q.Name()), slog.Any(logkey.Error, err))
		}
	}
}

// forwardQueue is the send queue toward neighbour for topic traffic.
type forwardQueue struct {
	neighbour string
	q         *queue.Queue
}

// forwardQueues returns the node's send queues toward neighbours for
// topic traffic ("_petrel.topics@<neighbour>"), by neighbour.
func (n *Node) forwardQueues() []forwardQueue {
	var out []forwardQueue
	for _, q := range n.store.Queues() {
		if nb, ok := strings.CutPrefix(q.Name(), interestAddr+"@"); ok && q.Kind() == queue.KindSend {
			out = append(out, forwardQueue{nb, q})
		}
	}
	slices.SortFunc(out, func(a, b forwardQueue) int { return strings.Compare(a.neighbour, b.neighbour) })
	return out
}

// oldestPublishes returns up to want of the oldest publishes of q, a send
// queue for topic traffic, that are not in flight: its rows but interest
// messages and rows it cannot read (left for the sender, which
// dead-letters them). Interest messages may be many among the oldest (a
// node whose clients subscribed to many patterns while its neighbour was
// away): it reads further, twice as far each time, until it has want or
// the queue ends.
func oldestPublishes(ctx context.Context, q *queue.Queue, want int) ([]queue.Browsed, error) {
	for n := want + 16; ; n *= 2 {
		rows, err := q.OldestFreeData(ctx, n)
		if err != nil {
			return nil, err
		}
		drop := make([]queue.Browsed, 0, want)
		for _, r := range rows {
			var m message.Message
			if m.UnmarshalBinary(r.Data) != nil {
				continue
			}
			if name, _, _ := message.ParseDestination(m.Destination); name == interestAddr {
				continue
			}
			if drop = append(drop, queue.Browsed{RowID: r.RowID, Priority: r.Priority}); len(drop) == want {
				return drop, nil
			}
		}
		if len(rows) < n {
			return drop, nil
		}
	}
}
