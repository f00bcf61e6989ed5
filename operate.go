package petrel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The operator's methods: look into a queue without consuming it, empty
// it, and send dead letters back where they were going. `petrel dlq`,
// `petrel purge` and the admin API (admin_api.go) call them.
//
// They name a queue as QueueStats does: a local address ("orders", or
// "orders@<this node>"), a dead-letter queue ("orders.dlq") or a send
// queue ("orders@b").

// ErrUnknownQueue is returned by Browse, Purge, DeadLetters, Replay and
// PurgeDeadLetters for a queue this node does not have.
var ErrUnknownQueue = queue.ErrUnknownQueue

// StoredMessage is a message as it sits in a queue, read without
// consuming it.
type StoredMessage struct {
	// Message is the decoded message, its TTL the time that remains; nil
	// when the stored bytes do not decode, and Err says why.
	Message *message.Message
	Err     error
	// Attempt is the delivery attempt the message is in, if in flight, or
	// that its next delivery will be.
	Attempt  int
	InFlight bool
	// Reason says why the message was moved to this queue (dead letter,
	// expiry address).
	Reason string
	// NotBefore is the end of its redelivery backoff, zero if none.
	NotBefore time.Time
}

// lookupQueue returns the queue called name.
func (n *Node) lookupQueue(name string) (*queue.Queue, error) {
	if strings.HasPrefix(name, subQueuePrefix) { // a subscription's queue, or its dead letters
		if q, ok := n.store.Lookup(name); ok {
			return q, nil
		}
		return nil, fmt.Errorf("queue %q: %w (petrel topics lists the subscriptions)", name, ErrUnknownQueue)
	}
	base, node, err := message.ParseDestination(name)
	if err != nil {
		return nil, err
	}
	if node == n.cfg.Name {
		name = base
	}
	q, ok := n.store.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", name, ErrUnknownQueue)
	}
	return q, nil
}

// Browse returns up to limit messages of the queue called name (all when
// limit <= 0), in the order they would be delivered, without consuming
// them. Messages in flight are included.
func (n *Node) Browse(ctx context.Context, name string, limit int) ([]StoredMessage, error) {
	q, err := n.lookupQueue(name)
	if err != nil {
		return nil, err
	}
	return n.browse(ctx, q, limit)
}

func (n *Node) browse(ctx context.Context, q *queue.Queue, limit int) ([]StoredMessage, error) {
	rows, err := q.Browse(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]StoredMessage, len(rows))
	for i, r := range rows {
		out[i] = n.storedOf(r)
	}
	return out, nil
}

// storedOf decodes a browsed row.
func (n *Node) storedOf(r queue.Browsed) StoredMessage {
	s := StoredMessage{Attempt: r.Attempt, InFlight: r.InFlight, Reason: r.Reason, NotBefore: r.NotBefore}
	s.Message, s.Err = message.Decode(r.Data, message.Limits{})
	if s.Err == nil && !r.ExpiresAt.IsZero() {
		s.Message.TTL = max(r.ExpiresAt.Sub(n.now()), time.Nanosecond)
	}
	return s
}

// Purge deletes every message of the queue called name that is not in
// flight and returns how many it deleted.
func (n *Node) Purge(ctx context.Context, name string) (int, error) {
	q, err := n.lookupQueue(name)
	if err != nil {
		return 0, err
	}
	if q.Kind() != queue.KindSend || n.checksums.GivenUpCount() == 0 {
		return q.Purge(ctx)
	}
	// The queue may hold file messages whose Send's hash failed, each
	// with its record in the store (giveUpHash). No sender settles a
	// purged one, so its record goes here: those the queue held before
	// the purge and not after. One in flight is not purged; its sender
	// settles it and drops the record itself.
	before, err := n.givenUpIn(ctx, q)
	if err != nil {
		return 0, err
	}
	count, err := q.Purge(ctx)
	if err != nil || len(before) == 0 {
		return count, err
	}
	after, err := n.givenUpIn(ctx, q)
	if err != nil {
		return count, err
	}
	for k := range before {
		if !after[k] {
			n.forgetGivenUp(k.origin, k.id)
			n.checksums.Drop(k.origin, k.id)
		}
	}
	return count, nil
}

// msgKey names a message by its origin and id.
type msgKey struct {
	origin message.NodeID
	id     uint64
}

// givenUpIn returns the file messages of q whose hash failed. It reads
// the whole queue, a page at a time, and keeps only their keys: Purge
// calls it only while some hash is given up.
func (n *Node) givenUpIn(ctx context.Context, q *queue.Queue) (map[msgKey]bool, error) {
	out := map[msgKey]bool{}
	err := q.Each(ctx, func(r queue.Browsed) bool {
		m, err := message.Peek(r.Data, message.Limits{})
		if err == nil && m.Kind == message.KindFile && n.checksums.IsGivenUp(m.Origin, m.ID) {
			out[msgKey{m.Origin, m.ID}] = true
		}
		return true
	})
	return out, err
}

// DeadLetterQueue returns the name of the dead-letter queue of addr: the
// dead_letter of its policy, by default "<addr>.dlq" (without "@node"),
// or addr itself if it names a dead-letter queue. It is "" when addr has
// no queue and no dead letters.
func (n *Node) DeadLetterQueue(addr string) (string, error) {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return "", err
	}
	return dlq.Name(), nil
}

// deadLetterQueue returns the dead-letter queue of addr, nil if addr has
// none yet. An addr with neither a queue nor dead letters is
// ErrUnknownQueue.
func (n *Node) deadLetterQueue(addr string) (*queue.Queue, error) {
	q, err := n.lookupQueue(addr)
	var name string
	switch {
	case err == nil && queue.IsDeadLetter(q.Name()):
		return q, nil
	case err == nil:
		name = q.Policy().DeadLetter
	case errors.Is(err, ErrUnknownQueue):
		// The queue may be gone from the configuration with its dead
		// letters still there.
		base, _, _ := strings.Cut(addr, "@")
		name = base + queue.DeadLetterSuffix
	default:
		return nil, err
	}
	if dlq, ok := n.store.Lookup(name); ok {
		return dlq, nil
	}
	if q != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("no queue %q, nor dead letters of it: %w", addr, ErrUnknownQueue)
}

// DeadLetters returns up to limit messages (all when limit <= 0) of the
// dead-letter queue of addr, without consuming them; none if it has no
// dead-letter queue yet.
func (n *Node) DeadLetters(ctx context.Context, addr string, limit int) ([]StoredMessage, error) {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return nil, err
	}
	return n.browse(ctx, dlq, limit)
}

// eachDeadLetter calls fn with up to limit (all when limit <= 0) dead
// letters of addr, in delivery order, reading them a page at a time, and
// stops at fn's first error, which it returns. An address with no
// dead-letter queue yet has none.
func (n *Node) eachDeadLetter(ctx context.Context, addr string, limit int, fn func(StoredMessage) error) error {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return err
	}
	var ferr error
	count := 0
	err = dlq.Each(ctx, func(r queue.Browsed) bool {
		ferr = fn(n.storedOf(r))
		count++
		return ferr == nil && (limit <= 0 || count < limit)
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// PurgeDeadLetters deletes the dead letters of addr that are not in
// flight and returns how many it deleted.
func (n *Node) PurgeDeadLetters(ctx context.Context, addr string) (int, error) {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return 0, err
	}
	return dlq.Purge(ctx)
}

// Replay moves up to limit dead letters of addr (all when limit <= 0)
// back where they were going: each to the queue its destination routes to
// now, as a send would (a message that does not decode goes to addr). The
// moves happen in one transaction, so a crash neither loses nor
// duplicates a message. A replayed message starts over: its delivery
// count and reason are cleared. Dead letters in flight, and those
// addressed to the dead-letter queue itself, stay. If a destination
// cannot be routed, nothing is moved. The dead letters are read a page at
// a time: a replay of millions holds their moves, not their messages.
func (n *Node) Replay(ctx context.Context, addr string, limit int) (int, error) {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return 0, err
	}
	return n.replayRows(ctx, addr, dlq, limit, nil)
}

// replayRows moves the rows of dlq (the dead-letter queue of addr) that
// pick takes, all when pick is nil, back where they were going, at most
// limit of them (all when limit <= 0), in one transaction; see Replay.
// It reads dlq a page at a time and keeps only the moves, so that
// replaying a million dead letters does not hold them all in memory.
func (n *Node) replayRows(ctx context.Context, addr string, dlq *queue.Queue, limit int, pick func(queue.Browsed) bool) (int, error) {
	var moves []queue.Move
	var ferr error
	err := dlq.Each(ctx, func(r queue.Browsed) bool {
		if r.InFlight || (pick != nil && !pick(r)) {
			return true
		}
		if limit > 0 && len(moves) == limit {
			return false
		}
		to, err := n.replayTarget(ctx, r.Data, addr)
		if err != nil {
			ferr = err
			return false
		}
		if to != dlq {
			moves = append(moves, queue.Move{RowID: r.RowID, To: to, Priority: r.Priority})
		}
		return true
	})
	if ferr != nil {
		return 0, ferr
	}
	if err != nil {
		return 0, err
	}
	if len(moves) == 0 {
		return 0, nil
	}
	return dlq.Move(ctx, moves)
}

// replayTarget is the queue a dead letter goes back to.
func (n *Node) replayTarget(ctx context.Context, data []byte, addr string) (*queue.Queue, error) {
	if q := n.subscriptionQueue(addr); q != nil {
		return q, nil // not the topic: that would copy it to every subscription
	}
	dest := addr
	if m, err := message.Peek(data, message.Limits{}); err == nil {
		dest = m.Destination
	}
	q, _, err := n.route(ctx, dest)
	if err != nil {
		return nil, fmt.Errorf("replay to %q: %w", dest, err)
	}
	return q, nil
}
