package petrel

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

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
// runs, within milliseconds. Dropped publishes pass through pruneBin.

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
func (n *Node) trimKeep(ctx context.Context, k *keepSpace, byAge bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	rows, err := k.q.Browse(ctx, 0)
	if err != nil {
		return fmt.Errorf("trim keep queue of %q: %w", k.pattern, err)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].RowID < rows[j].RowID })
	over := len(rows) - k.cfg.Messages
	cutoff := n.now().Add(-k.cfg.Age).UnixNano()
	var count, age []int64
	var oldest int64
	for i, r := range rows {
		if i < over {
			count = append(count, r.RowID)
			continue
		}
		if k.cfg.Age <= 0 {
			continue
		}
		var m message.Message
		if err := m.UnmarshalBinary(r.Data); err != nil || m.Timestamp.IsZero() {
			continue // no age to judge: only the count bound drops it
		}
		ts := m.Timestamp.UnixNano()
		if byAge && ts < cutoff {
			age = append(age, r.RowID)
			continue
		}
		if oldest == 0 || ts < oldest {
			oldest = ts
		}
	}
	k.oldest.Store(oldest)
	for _, drop := range []struct {
		rows   []int64
		reason string
	}{{count, keepDropCount}, {age, keepDropAge}} {
		moved, err := n.dropRows(ctx, k.q, drop.rows)
		n.topics.countKeepDropped(drop.reason, moved)
		if err != nil {
			return fmt.Errorf("trim keep queue of %q: %w", k.pattern, err)
		}
	}
	return nil
}

// dropRows deletes rows of q, through pruneBin, and returns how many.
func (n *Node) dropRows(ctx context.Context, q *queue.Queue, rows []int64) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	t := n.topics
	t.pruneMu.Lock()
	defer t.pruneMu.Unlock()
	bin, err := n.store.Queue(ctx, pruneBin, queue.KindReceive)
	if err != nil {
		return 0, err
	}
	moves := make([]queue.Move, len(rows))
	for i, r := range rows {
		moves[i] = queue.Move{RowID: r, To: bin}
	}
	moved, err := q.Move(ctx, moves)
	if err != nil {
		return 0, err
	}
	_, err = bin.Purge(ctx)
	return moved, err
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
	rows, err := k.q.Browse(ctx, 0)
	if err != nil {
		return fmt.Errorf("subscription %q takes kept publishes: %w", e.name, err)
	}
	var moves []queue.Move
	for _, r := range rows {
		var m message.Message
		if err := m.UnmarshalBinary(r.Data); err != nil {
			continue
		}
		name, _, _ := message.ParseDestination(m.Destination)
		if e.pattern.Match(name) {
			moves = append(moves, queue.Move{RowID: r.RowID, To: e.q})
		}
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
