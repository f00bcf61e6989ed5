package petrel

import (
	"context"
	"log/slog"

	"github.com/petrelmq/petrel/internal/logkey"
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
