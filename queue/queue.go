package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/petrelmq/petrel/message"
)

const levels = message.MaxPriority + 1

// counters are a queue's persisted statistics.
type counters struct {
	depth, bytes, enqueued, acked, expired, deduped, deadLettered int64
	// overflowed counts what the queue dropped at its bound: the Optional
	// puts refused past maxDepth, and the rows DeleteOverflowed deleted.
	overflowed int64
	// dedupeEntries is the size of the dedupe window, counted at open and
	// kept in memory: it is not a column of queues.
	dedupeEntries int64
}

// entry is a stored message as the queue holds it in memory.
type entry struct {
	rowid      int64
	expiresAt  int64 // unix nanos, 0 = never
	deliveries int   // failed deliveries so far, as persisted
	notBefore  int64 // unix nanos: not deliverable before
	reason     string
	data       []byte
	// body is the shared body's id for a row of copies, 0 for a row of
	// messages. data is then the body's bytes, shared with the other
	// queues' entries: read only, as every entry's data is.
	body int64
	// sh is the shared body whose bytes data are, for a copy, so that
	// the copies of one body in memory decode it once; nil otherwise.
	sh *bodyData
	// run and runLen are, for a copy, the key and the length of its run
	// as it was when the entry was made (0 when unknown): an ack of a
	// whole run then deletes it without reading it (see deleteWholeRun).
	run    int64
	runLen int
}

// level is the in-memory head of one priority of one queue.
type level struct {
	ready      []entry // FIFO of committed messages, by rowid
	head       int     // index of the first live entry of ready
	retry      entryHeap
	lastLoaded int64 // every rowid of this level up to here is in memory or in flight
	spilled    bool  // rows past lastLoaded may exist on disk only
}

type lease struct {
	e        entry
	prio     uint8
	attempt  int
	token    uint64 // unique per delivery of this queue
	deadline int64
	// settling says the lease's delivery was settled (acked, or moved to
	// the dead-letter queue) and the writer has not committed that yet.
	// The lease stays in inflight until the commit, which ends it, or
	// until the commit fails, which gives it back (see Queue.unsettle):
	// a message whose settle did not commit must not be lost to memory
	// while its row is still stored.
	settling bool
}

// Queue is one receive or send queue. It is safe for concurrent use; any
// number of consumers may poll it, each message going to one of them.
type Queue struct {
	s    *Store
	id   int64
	name string
	kind Kind

	mu       sync.Mutex
	policy   Policy
	lv       [levels]level
	inflight map[int64]*lease
	// settling counts the leases of inflight being settled: they are no
	// longer in flight to a consumer (Stats).
	settling int
	delayed  delayHeap
	bufN     int
	bufBytes int
	c        counters
	waitCh   chan struct{}
	waiting  bool
	// refillBytes counts the bytes of the refill under way.
	refillBytes int
	// tokens numbers the leases handed out.
	tokens uint64
	// frozen counts the admin requests (purge, move) between their apply
	// and their commit: while it is above 0 no message is handed out, so
	// that none of the rows they remove is leased meanwhile. See freeze.
	frozen int
	// acks are the acks gathered for the writer, ackQueued whether a
	// request to take them is on its way (see ack). spareAcks is the
	// array the writer gave back after its last take, for the next.
	acks      []ackRow
	spareAcks []ackRow
	ackQueued bool
	// gone is set once the queue was dropped (see Store.Drop).
	gone atomic.Bool
	// maxDepth bounds what Optional puts fill the queue to (SetMaxDepth).
	maxDepth atomic.Int64
}

func newQueue(s *Store, id int64, name string, kind Kind) *Queue {
	q := &Queue{s: s, id: id, name: name, kind: kind, inflight: map[int64]*lease{}, waitCh: make(chan struct{})}
	// Until a refill proves otherwise, any level may have rows on disk.
	for i := range q.lv {
		q.lv[i].spilled = true
	}
	q.policy = Policy{}.withDefaults(name)
	return q
}

func (p Policy) withDefaults(name string) Policy {
	if p.MaxDeliveries <= 0 {
		p.MaxDeliveries = 10
	}
	if p.DeadLetter == "" {
		// A send queue "orders@b" dead-letters into the local "orders.dlq":
		// an address name cannot hold "@".
		base, _, _ := strings.Cut(name, "@")
		p.DeadLetter = base + DeadLetterSuffix
	}
	if p.LeaseTimeout <= 0 {
		p.LeaseTimeout = 30 * time.Second
	}
	if p.RedeliveryDelay <= 0 {
		p.RedeliveryDelay = time.Second
	}
	if p.MaxRedeliveryDelay <= 0 {
		p.MaxRedeliveryDelay = time.Minute
	}
	if p.MaxRedeliveryDelay < p.RedeliveryDelay {
		p.MaxRedeliveryDelay = p.RedeliveryDelay
	}
	return p
}

// DeadLetterSuffix names a queue's default dead-letter queue. A queue whose
// name ends with it has no dead-letter queue of its own: its messages are
// redelivered without limit, so nothing ever falls off the end.
const DeadLetterSuffix = ".dlq"

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Kind returns whether this is a receive or a send queue.
func (q *Queue) Kind() Kind { return q.kind }

// SetPolicy replaces the queue's consumer policy. Zero fields take their
// defaults. Messages already in flight keep their lease.
func (q *Queue) SetPolicy(p Policy) {
	q.mu.Lock()
	q.policy = p.withDefaults(q.name)
	q.mu.Unlock()
}

// SetMaxDepth bounds the messages the queue holds for Optional puts, such
// as a topic subscription's copies, or a node's copies of topic publishes
// toward a neighbour (Config.TopicForwardMaxQueued): past n, a copy for it is not
// stored, the publish succeeds for the others, and the queue counts it
// (Stats.Overflowed), as a broker drops what it would queue past a slow
// subscriber's bound (Mosquitto's max_queued_messages). Other puts are
// not bounded by it. n <= 0 removes the bound. Not persisted.
func (q *Queue) SetMaxDepth(n int64) { q.maxDepth.Store(max(n, 0)) }

// Policy returns the queue's consumer policy with defaults filled in.
func (q *Queue) Policy() Policy {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.policy
}

// Put stores m in q and returns once it is durable. With dedupe, a message
// whose (Origin, ID) q already accepted within the window is dropped, and
// Put still succeeds.
func (q *Queue) Put(ctx context.Context, m *message.Message, dedupe bool) error {
	op, err := q.s.Submit([]Put{{Queue: q, Msg: m, Dedupe: dedupe}})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

// Submit hands puts to the group commit and returns at once. They commit
// together, all or none; the Op says when. Messages without Data are
// encoded here, in the caller's goroutine.
func (s *Store) Submit(puts []Put) (*Op, error) { return s.SubmitMarked(puts, "", nil) }

// SubmitMarked is Submit that also stores value under the meta key, in
// the same transaction as the puts: after a crash the key is there if and
// only if the puts are. A put refused (a full store, a queue gone)
// leaves no key. With no puts it stores the key alone. An empty key is
// Submit.
func (s *Store) SubmitMarked(puts []Put, key string, value []byte) (*Op, error) {
	if key != "" && value == nil {
		value = []byte{}
	}
	if len(puts) == 0 && key != "" {
		return s.SubmitMeta(key, value)
	}
	for i := range puts {
		p := &puts[i]
		if p.Queue == nil || p.Msg == nil {
			return nil, fmt.Errorf("put %d: no queue or message", i)
		}
		if p.Msg.Priority > message.MaxPriority {
			return nil, fmt.Errorf("put into %q: priority %d: %w", p.Queue.name, p.Msg.Priority, message.ErrPriority)
		}
		if p.Data == nil {
			data, err := p.Msg.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("put into %q: %w", p.Queue.name, err)
			}
			p.Data = data
		}
	}
	r := &request{kind: reqPut, puts: puts, op: newOp(), name: key, data: value}
	if err := s.w.submit(r); err != nil {
		return nil, err
	}
	return r.op, nil
}

// appended is called by the writer, in rowid order, for each committed
// message. The message joins the in-memory head when everything before it
// is in memory and the prefetch budget allows; otherwise its level is
// marked spilled and a later refill reads it from disk.
func (q *Queue) appended(prio uint8, e entry) {
	q.mu.Lock()
	l := &q.lv[prio]
	if e.rowid > l.lastLoaded {
		if !l.spilled && q.bufN < q.s.cfg.PrefetchMessages && q.bufBytes+len(e.data) <= q.s.cfg.PrefetchBytes &&
			q.s.prefetched.Load()+int64(readyCost(e)) <= int64(q.s.cfg.PrefetchTotalBytes) {
			l.ready = append(l.ready, e)
			l.lastLoaded = e.rowid
			q.holdLocked(e)
		} else {
			l.spilled = true
		}
	}
	q.wakeLocked()
	q.mu.Unlock()
}

// entrySize is what an entry itself takes in a ready array.
const entrySize = int(unsafe.Sizeof(entry{}))

// readyCost is what e costs the store's prefetch budget: its bytes, and
// its entry, which is most of the cost of a small message. A body shared
// by several queues' copies is counted once per copy, which overstates it.
func readyCost(e entry) int { return len(e.data) + entrySize }

// holdLocked counts e, which joined a ready array, against the queue's
// and the store's prefetch budgets; releaseLocked gives it back.
func (q *Queue) holdLocked(e entry) {
	q.bufN++
	q.bufBytes += len(e.data)
	q.s.prefetched.Add(int64(readyCost(e)))
}

func (q *Queue) releaseLocked(e entry) {
	q.bufN--
	q.bufBytes -= len(e.data)
	q.s.prefetched.Add(-int64(readyCost(e)))
}

// readyCostLocked is what all of q's ready entries cost the store's
// budget: the sum of their readyCost.
func (q *Queue) readyCostLocked() int { return q.bufBytes + q.bufN*entrySize }

func (q *Queue) addCounters(d *counters) {
	q.mu.Lock()
	q.c.depth += d.depth
	q.c.bytes += d.bytes
	q.c.enqueued += d.enqueued
	q.c.acked += d.acked
	q.c.expired += d.expired
	q.c.deduped += d.deduped
	q.c.deadLettered += d.deadLettered
	q.c.dedupeEntries += d.dedupeEntries
	q.c.overflowed += d.overflowed
	q.mu.Unlock()
}

// wake releases every goroutine blocked in Receive.
func (q *Queue) wake() {
	q.mu.Lock()
	q.wakeLocked()
	q.mu.Unlock()
}

func (q *Queue) wakeLocked() {
	if q.waiting {
		close(q.waitCh)
		q.waitCh = make(chan struct{})
		q.waiting = false
	}
}

// Stats are a queue's figures at one moment.
type Stats struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Depth counts the stored messages, in flight included.
	Depth    int64 `json:"depth"`
	InFlight int64 `json:"in_flight"`
	Bytes    int64 `json:"bytes"`
	// Counters since the queue was created; they survive restarts.
	Enqueued     int64 `json:"enqueued"`
	Acked        int64 `json:"acked"`
	Expired      int64 `json:"expired"`
	Deduped      int64 `json:"deduped"`
	DeadLettered int64 `json:"dead_lettered"`
	// DedupeEntries is how many (origin, id) pairs the dedupe window holds
	// now; it is bounded by DedupeMaxEntries and DedupeWindow.
	DedupeEntries int64 `json:"dedupe_entries"`
	// Overflowed counts what the queue dropped at its bound: the
	// Optional puts (a topic subscription's copies) not stored because
	// it held its MaxDepth, and the rows DeleteOverflowed deleted. It is
	// persisted with the drop, as the counters above are.
	Overflowed int64 `json:"overflowed,omitempty"`
}

// Stats returns the queue's figures.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{
		Name: q.name, Kind: q.kind,
		Depth: q.c.depth, InFlight: int64(len(q.inflight) - q.settling), Bytes: q.c.bytes,
		Enqueued: q.c.enqueued, Acked: q.c.acked, Expired: q.c.expired,
		Deduped: q.c.deduped, DeadLettered: q.c.deadLettered,
		DedupeEntries: q.c.dedupeEntries, Overflowed: q.c.overflowed,
	}
}

// IsDeadLetter reports whether name is a dead-letter queue's name.
func IsDeadLetter(name string) bool { return strings.HasSuffix(name, DeadLetterSuffix) }

// trim gives back what the queue's in-memory buffers grew to in a burst,
// for the parts that are empty now: a drained level's array, an empty
// map of leases (a Go map never shrinks) and the arrays of gathered acks.
// The writer calls it once it has been idle for a while.
func (q *Queue) trim() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.lv {
		l := &q.lv[i]
		if l.head == len(l.ready) {
			l.ready, l.head = nil, 0
		}
		if len(l.retry) == 0 {
			l.retry = nil
		}
	}
	if len(q.inflight) == 0 {
		q.inflight = map[int64]*lease{}
	}
	if len(q.acks) == 0 && !q.ackQueued {
		q.acks = nil
	}
	q.spareAcks = nil
	if len(q.delayed) == 0 {
		q.delayed = nil
	}
}
