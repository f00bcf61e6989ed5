package petrel

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Pruning: when interest learned from a neighbour goes away (its
// subscriber withdrew it, or it was non-durable and its link stayed down
// past the grace), the publishes already waiting in the send queue toward
// that neighbour for it would only be dropped as unrouted at the far end,
// after crossing the link, and for a neighbour that is unreachable they
// would hold the store meanwhile. So they are dropped here, counted: each
// one that no interest still learned from that neighbour matches.
//
// The pruned rows are deleted (queue.Delete), pruneBatch rows per
// transaction.

// pruneBin names the queue pruned rows passed through before they could
// be deleted where they were (moved there, then purged): a node that
// stopped in between left them there, and its next start purges them.
const pruneBin = "topic:pruned"

// The reasons of petrel_topic_pruned_total.
const (
	pruneUnsubscribed = "unsubscribed"
	pruneGrace        = "grace"
)

// pruneToward drops what waits in the topic send queue toward nb that no
// interest learned from nb matches any more, and returns how many it
// dropped. Interest messages and rows a sender holds in flight are left:
// those in flight reach nb and are dropped there as unrouted.
func (n *Node) pruneToward(ctx context.Context, nb, reason string) (int, error) {
	q, ok := n.store.Lookup(message.JoinDestination(interestAddr, nb))
	if !ok || q.Kind() != queue.KindSend {
		return 0, nil
	}
	t := n.topics
	t.pruneMu.Lock()
	defer t.pruneMu.Unlock()
	t.pruneRuns.Add(1)
	// The queue is read a page at a time and pruned a batch at a time: a
	// neighbour away for a day may have millions of publishes waiting.
	// Each batch is one transaction; a failure leaves the rest to be
	// delivered and dropped at nb as unrouted.
	var rows []queue.Browsed
	pruned := 0
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		deleted, err := q.Delete(ctx, rows)
		rows = rows[:0]
		pruned += deleted
		t.countPruned(reason, deleted)
		return err
	}
	var ferr error
	err := q.Each(ctx, func(r queue.Browsed) bool {
		if r.InFlight {
			return true
		}
		var m message.Message
		if err := m.UnmarshalBinary(r.Data); err != nil {
			// This node wrote it; a row it cannot read is left for the
			// sender, which dead-letters it.
			return true
		}
		name, _, _ := message.ParseDestination(m.Destination)
		if name == interestAddr {
			return true
		}
		// The copy's hops end with this node, as forwardPuts wrote them.
		if slices.Contains(t.remote.nextHops(name, hopsOf(&m)), nb) {
			return true
		}
		rows = append(rows, queue.Browsed{RowID: r.RowID, Priority: r.Priority})
		if len(rows) == pruneBatch {
			ferr = flush()
		}
		return ferr == nil
	})
	if ferr == nil && err == nil {
		ferr = flush()
	}
	if err := cmp.Or(ferr, err); err != nil {
		return pruned, fmt.Errorf("prune toward %s: %w", nb, err)
	}
	return pruned, nil
}

// pruneBatch is how many rows a prune deletes per transaction.
const pruneBatch = 4096

// wantPrune asks the janitor to prune the send queue toward nb for
// withdrawn interest. A prune reads the whole queue, and a neighbour
// decides when it withdraws: one that subscribes and unsubscribes over
// and over (a client behind it that connects and goes) would have this
// node read its backlog toward it once per withdrawal. So withdrawals wait
// for the janitor, which prunes each neighbour that asked once per run,
// and runs no more than a tenth of the time (runPrunes, pruneGapMin).
func (n *Node) wantPrune(nb string) {
	t := n.topics
	t.pruneWantMu.Lock()
	if t.pruneWant == nil {
		t.pruneWant = map[string]bool{}
	}
	t.pruneWant[nb] = true
	t.pruneWantMu.Unlock()
	select {
	case t.pruneKick <- struct{}{}:
	default:
	}
}

// pruneGapMin is the least time between two runs of the prunes that
// withdrawals asked for.
const pruneGapMin = 500 * time.Millisecond

// runPrunes prunes the send queue toward each neighbour that asked since
// the last run, and returns when the next run may start: pruneGapMin
// after this one, or nine times as long as it took, whichever is later.
func (n *Node) runPrunes(ctx context.Context) time.Time {
	t := n.topics
	t.pruneWantMu.Lock()
	want := t.pruneWant
	t.pruneWant = nil
	t.pruneWantMu.Unlock()
	start := time.Now()
	for _, nb := range slices.Sorted(maps.Keys(want)) {
		n.pruneLogged(ctx, nb, pruneUnsubscribed)
	}
	end := time.Now()
	return end.Add(max(pruneGapMin, 9*end.Sub(start)))
}

// pruneLogged is pruneToward for the paths that cannot return its error:
// what was not pruned is delivered, and dropped at nb as unrouted.
func (n *Node) pruneLogged(ctx context.Context, nb, reason string) {
	moved, err := n.pruneToward(ctx, nb, reason)
	if err != nil {
		n.log.Warn("prune topic publishes waiting for withdrawn interest; they are delivered and dropped there as unrouted",
			slog.String("neighbour", nb), slog.Any(logkey.Error, err))
	}
	if moved > 0 {
		n.log.Info("dropped topic publishes that waited for withdrawn interest", slog.String("neighbour", nb),
			slog.String("reason", reason), slog.Int("dropped", moved))
	}
}

// countPruned adds to petrel_topic_pruned_total.
func (t *topics) countPruned(reason string, k int) {
	switch reason {
	case pruneGrace:
		t.prunedGrace.Add(int64(k))
	default:
		t.prunedUnsub.Add(int64(k))
	}
}

// emptyPruneBin purges what a crash left in pruneBin.
func (n *Node) emptyPruneBin(ctx context.Context) error {
	bin, ok := n.store.Lookup(pruneBin)
	if !ok {
		return nil
	}
	if _, err := bin.Purge(ctx); err != nil {
		return fmt.Errorf("empty %s: %w", pruneBin, err)
	}
	return nil
}
