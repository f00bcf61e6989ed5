package petrel

import (
	"context"
	"log/slog"
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
		if err := n.trimSubscription(ctx, e); err != nil && ctx.Err() == nil {
			n.log.Warn("drop a subscription's oldest messages past its bound; tried again at the next publish or tick",
				slog.String("subscription", e.name), slog.Any(logkey.Error, err))
		}
	}
}

func (n *Node) trimSubscription(ctx context.Context, e *subEntry) error {
	for {
		over := e.q.Stats().Depth - e.bound
		if over <= 0 {
			return nil
		}
		rows, err := e.q.OldestFree(ctx, int(min(over, pruneBatch)))
		if err != nil || len(rows) == 0 {
			return err
		}
		dropped, err := e.q.DeleteOverflowed(ctx, rows)
		if err != nil || dropped == 0 {
			return err // what is left over is in flight, or gone already
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
	for _, q := range n.store.Queues() {
		if q.Kind() != queue.KindSend || !strings.HasPrefix(q.Name(), interestAddr+"@") || q.Stats().Depth <= bound {
			continue
		}
		if err := trimForward(ctx, q, bound); err != nil && ctx.Err() == nil {
			n.log.Warn("drop the oldest publishes waiting toward a neighbour past topic_forward_max_queued; tried again at the next publish or tick",
				slog.String(logkey.Queue, q.Name()), slog.Any(logkey.Error, err))
		}
	}
}

func trimForward(ctx context.Context, q *queue.Queue, bound int64) error {
	for {
		over := q.Stats().Depth - bound
		if over <= 0 {
			return nil
		}
		drop, err := oldestPublishes(ctx, q, int(min(over, pruneBatch)))
		if err != nil || len(drop) == 0 {
			return err // or what is left over is in flight, or interest
		}
		dropped, err := q.DeleteOverflowed(ctx, drop)
		if err != nil || dropped == 0 {
			return err
		}
	}
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
