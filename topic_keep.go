package petrel

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Keep policies (TopicKeep). A space with one holds the publishes that
// match no subscription, local or remote, in a receive queue of its own,
// keepQueuePrefix+pattern, that nothing consumes: the publish is put
// there instead of being dropped, in the store operation its copies would
// have taken. A durable subscription made later moves the held publishes
// its pattern matches into its own queue (queue.Move: one transaction, so
// a crash leaves each in one queue or the other). The queue survives
// restarts as any queue does.
//
// The bounds are kept by the topic janitor (topic_grace.go): a publish
// that goes to a keep queue wakes it, and it drops the oldest (by store
// order) past Messages; each tick it drops those older than Age, once the
// oldest held may be. So a burst may pass Messages until the janitor
// runs, within milliseconds. Dropped publishes are deleted (queue.Delete).

// keepQueuePrefix names keep queues: ':' keeps them clear of addresses.
const keepQueuePrefix = "topic:keep:"

// The reasons of petrel_topic_keep_dropped_total.
const (
	keepDropCount = "messages"
	keepDropAge   = "age"
)

// keepSpace is one space's keep policy and queue.
type keepSpace struct {
	pattern address.Pattern
	cfg     TopicKeep
	q       *queue.Queue // set by openKeeps
	// mu serialises the trims and takes of q.
	mu sync.Mutex
	// oldest is the timestamp (unix nanos) of the oldest publish held, 0
	// when none or unknown; the age trim runs only once it may be due.
	oldest atomic.Int64
}

// keepFor returns the keep policy of the first space that holds topic
// and has one, nil when none has.
func (t *topics) keepFor(topic string) *keepSpace {
	for _, k := range t.keeps {
		if k.pattern.Match(topic) {
			return k
		}
	}
	return nil
}

// openKeeps opens the keep queues, and trims them to their bounds, which
// the configuration may have lowered.
func (n *Node) openKeeps(ctx context.Context) error {
	for _, k := range n.topics.keeps {
		q, err := n.store.Queue(ctx, keepQueuePrefix+k.pattern.String(), queue.KindReceive)
		if err != nil {
			return fmt.Errorf("open keep queue of %q: %w", k.pattern, err)
		}
		k.q = q
		if err := n.trimKeep(ctx, k, true); err != nil {
			return err
		}
	}
	return nil
}

// keepPut returns the put that holds m in k's queue, and counts it.
func (n *Node) keepPut(k *keepSpace, m *message.Message, data []byte, dedupe bool) queue.Put {
	n.topics.kept.Add(1)
	if !m.Timestamp.IsZero() {
		k.oldest.CompareAndSwap(0, m.Timestamp.UnixNano())
	}
	return queue.Put{Queue: k.q, Msg: m, Data: data, Dedupe: dedupe}
}

// keepTrimGap is the least time between two trims a publish asks for: a
// keep queue passes its bound by what is published meanwhile at most.
const keepTrimGap = 10 * time.Millisecond

// kickKeeps wakes the janitor to enforce the keep bounds.
func (n *Node) kickKeeps() {
	select {
	case n.topics.keepKick <- struct{}{}:
	default:
	}
}

// trimKeeps enforces every keep bound that may be due: Messages always,
// Age once the oldest held may be too old.
func (n *Node) trimKeeps(ctx context.Context) {
	now := n.now().UnixNano()
	for _, k := range n.topics.keeps {
		old := k.oldest.Load()
		byAge := k.cfg.Age > 0 && old != 0 && now-old > int64(k.cfg.Age)
		if !byAge && k.q.Stats().Depth <= int64(k.cfg.Messages) {
			continue
		}
		if err := n.trimKeep(ctx, k, byAge); err != nil {
			n.log.Warn("trim the publishes a topic space keeps; tried again at the next publish or tick",
				slog.String("pattern", k.pattern.String()), slog.Any(logkey.Error, err))
		}
	}
}

// trimKeep drops k's publishes past its bounds: the oldest past Messages,
// and, with byAge, those older than Age.
//
// A full keep queue is trimmed after every burst of publishes, so the
// count bound reads only the heads of the queue's priorities
// (queue.OldestRows), never the whole queue: reading it all made a
// publish to a full queue of 50,000 cost 170-200 us of CPU, 30 times a
// publish's. The age bound reads the whole queue, a page at a time, and
// runs only once the oldest publish held may be too old (k.oldest, which
// the count bound leaves as it was: older than it may be now, so the age
// bound runs too early rather than too late).
func (n *Node) trimKeep(ctx context.Context, k *keepSpace, byAge bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		over := int(k.q.Stats().Depth) - k.cfg.Messages
		if over <= 0 {
			break
		}
		rows, err := k.q.OldestRows(ctx, min(over, pruneBatch))
		if err != nil {
			return fmt.Errorf("trim keep queue of %q: %w", k.pattern, err)
		}
		moved, err := n.dropRows(ctx, k.q, rows)
		n.topics.countKeepDropped(keepDropCount, moved)
		if err != nil {
			return fmt.Errorf("trim keep queue of %q: %w", k.pattern, err)
		}
		if moved == 0 {
			break // what is left over is gone already, or not committed yet
		}
	}
	if !byAge || k.cfg.Age <= 0 {
		return nil
	}
	cutoff := n.now().Add(-k.cfg.Age).UnixNano()
	var old []queue.Browsed
	var oldest int64
	var derr error
	drop := func() {
		moved, err := n.dropRows(ctx, k.q, old)
		n.topics.countKeepDropped(keepDropAge, moved)
		old, derr = old[:0], err
	}
	err := k.q.Each(ctx, func(r queue.Browsed) bool {
		m, err := message.Peek(r.Data, message.Limits{})
		if err != nil || m.Timestamp.IsZero() {
			return true // no age to judge: only the count bound drops it
		}
		ts := m.Timestamp.UnixNano()
		if ts >= cutoff {
			if oldest == 0 || ts < oldest {
				oldest = ts
			}
			return true
		}
		if old = append(old, queue.Browsed{RowID: r.RowID, Priority: r.Priority}); len(old) == pruneBatch {
			drop()
		}
		return derr == nil
	})
	if err == nil && derr == nil {
		drop()
	}
	if err = cmp.Or(err, derr); err != nil {
		return fmt.Errorf("trim keep queue of %q: %w", k.pattern, err)
	}
	k.oldest.Store(oldest)
	return nil
}

// dropRows deletes rows of q (their RowID and Priority), and returns how
// many.
func (n *Node) dropRows(ctx context.Context, q *queue.Queue, rows []queue.Browsed) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	return q.Delete(ctx, rows)
}

// takeKept moves into the new durable subscription e the held publishes
// its pattern matches. Called with topics.subMu held, once e is in
// topics.subs: a publish from then on reaches e itself.
func (n *Node) takeKept(ctx context.Context, e *subEntry) error {
	for _, k := range n.topics.keeps {
		if err := n.takeKeptFrom(ctx, k, e); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) takeKeptFrom(ctx context.Context, k *keepSpace, e *subEntry) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// One transaction for all the moves; the queue is read a page at a
	// time, and only the moves are held.
	var moves []queue.Move
	err := k.q.Each(ctx, func(r queue.Browsed) bool {
		m, err := message.Peek(r.Data, message.Limits{})
		if err != nil {
			return true
		}
		name, _, _ := message.ParseDestination(m.Destination)
		if e.pattern.Match(name) {
			moves = append(moves, queue.Move{RowID: r.RowID, To: e.q, Priority: r.Priority})
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("subscription %q takes kept publishes: %w", e.name, err)
	}
	if len(moves) == 0 {
		return nil
	}
	moved, err := k.q.Move(ctx, moves)
	if err != nil {
		return fmt.Errorf("subscription %q takes kept publishes: %w", e.name, err)
	}
	n.topics.keepTaken.Add(int64(moved))
	return nil
}

// countKeepDropped adds to petrel_topic_keep_dropped_total.
func (t *topics) countKeepDropped(reason string, k int) {
	if reason == keepDropAge {
		t.keepDroppedAge.Add(int64(k))
	} else {
		t.keepDroppedCount.Add(int64(k))
	}
}
