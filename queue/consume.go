package queue

import (
	"container/heap"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
	"unicode/utf8"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
)

// Delivery is a message handed to one consumer under a lease. Exactly one
// of Ack, Nack or Release should follow; if none does before the lease
// times out, the message is delivered again.
type Delivery struct {
	q     *Queue
	RowID int64
	// Attempt is 1 on the first delivery and grows with each nack or lease
	// timeout.
	Attempt  int
	Priority uint8
	// ExpiresAt is when the message expires, zero if never.
	ExpiresAt time.Time
	// Reason says why the message was moved here, for messages in a
	// dead-letter queue or an expiry address.
	Reason string
	// Data is the encoded message.
	Data []byte
	// token identifies the lease this delivery holds.
	token uint64
	// sh is the shared body of a copy, nil for other messages.
	sh *bodyData
}

// Queue returns the queue the delivery came from.
func (d *Delivery) Queue() *Queue { return d.q }

// Message decodes the delivery. Its TTL is set to the time that remains.
func (d *Delivery) Message() (*message.Message, error) {
	t, err := d.shared()
	var m *message.Message
	switch {
	case err != nil:
	case t != nil:
		m = t.Clone()
	default:
		m, err = message.Decode(d.Data, message.Limits{})
	}
	if err != nil {
		return nil, fmt.Errorf("decode message %d of %q: %w", d.RowID, d.q.name, err)
	}
	d.setTTL(m)
	return m, nil
}

// MessageTo is Message, decoding into *m, which it overwrites: a caller
// that allocates m together with something else saves an allocation.
func (d *Delivery) MessageTo(m *message.Message) error {
	t, err := d.shared()
	switch {
	case err != nil:
	case t != nil:
		t.CopyTo(m)
	default:
		// The limits of Decode with Limits{}, into m.
		err = m.UnmarshalBinary(d.Data)
	}
	if err != nil {
		return fmt.Errorf("decode message %d of %q: %w", d.RowID, d.q.name, err)
	}
	d.setTTL(m)
	return nil
}

func (d *Delivery) setTTL(m *message.Message) {
	if !d.ExpiresAt.IsZero() {
		m.TTL = max(d.ExpiresAt.Sub(d.q.s.now()), time.Nanosecond)
	}
}

// shared returns the decoded message of a copy's shared body, nil for
// other messages and for the copy of a single put. A shared body is
// decoded once, by the first of its copies to be: the others copy that
// message, which costs a copy of its body and properties and no
// parsing, and the copies of a publish to eight subscriptions were
// decoded eight times before. The message is never handed out: each copy
// gets its own Properties and Body.
//
// Once the body cache dropped that message, past its budget, shared
// returns nil and the copies left decode their own: making it again would
// push out another that copies still want, and a subscription that trails
// far behind would make every copy's decode cost more than its own.
func (d *Delivery) shared() (*message.Message, error) {
	sh := d.sh
	if sh == nil {
		return nil, nil
	}
	if m := sh.msg.Load(); m != nil {
		return m, nil
	}
	if !sh.decoding.CompareAndSwap(false, true) {
		return nil, nil // dropped, or being made by another copy
	}
	m, err := message.Decode(d.Data, message.Limits{})
	if err != nil {
		return nil, err
	}
	sh.msg.Store(m)
	d.q.s.bodies.decodedBy(sh)
	return m, nil
}

// Ack settles the delivery: the message is deleted at the next group
// commit. It does not wait for that commit, so it cannot report that the
// commit failed (a full disk): the message is then delivered again, as
// after a lease timeout.
func (d *Delivery) Ack() error { return d.q.ack(d) }

// Nack gives the message back for redelivery after a backoff that doubles
// with each attempt. Past the queue's MaxDeliveries it moves to the
// dead-letter queue, with reason.
func (d *Delivery) Nack(reason string) error { return d.q.nack(d, reason) }

// Release gives the message back at once without counting an attempt, as a
// sender does with what was in flight when its link dropped.
func (d *Delivery) Release() error { return d.q.release(d) }

// Poll returns the next ready message under a lease, or ErrNoMessage.
func (q *Queue) Poll() (*Delivery, error) {
	d, _, _, err := q.poll(false)
	return d, err
}

// ReceiveBatch blocks until a message is ready, ctx is done or the store
// closes, then appends to dst the ready messages, up to limit (at least 1),
// without waiting for more.
func (q *Queue) ReceiveBatch(ctx context.Context, dst []*Delivery, limit int) ([]*Delivery, error) {
	limit = max(limit, 1)
	for {
		ds, ch, next, err := q.pollN(true, dst, limit, -1)
		if err == nil {
			return ds, nil
		}
		if !errors.Is(err, ErrNoMessage) {
			return dst, err
		}
		if err := q.wait(ctx, ch, next); err != nil {
			return dst, err
		}
	}
}

// PollBatch appends to dst the ready messages, up to limit (at least 1),
// or returns ErrNoMessage when there is none.
func (q *Queue) PollBatch(dst []*Delivery, limit int) ([]*Delivery, error) {
	ds, _, _, err := q.pollN(false, dst, max(limit, 1), -1)
	return ds, err
}

// Receive blocks until a message is ready, ctx is done or the store closes.
func (q *Queue) Receive(ctx context.Context) (*Delivery, error) {
	var one [1]*Delivery
	ds, err := q.ReceiveBatch(ctx, one[:0], 1)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// PollWithin is Poll for a caller with room for maxBytes of encoded
// message left: when the next ready message is longer, it takes nothing
// and returns ErrTooLarge. A caller that answers with a bounded batch
// stops there, and the message is not taken only to be given back.
func (q *Queue) PollWithin(maxBytes int) (*Delivery, error) {
	d, _, _, err := q.pollWithin(false, maxBytes)
	return d, err
}

// ReceiveWithin is Receive with PollWithin's room: it waits for a ready
// message, and takes it only if it fits.
func (q *Queue) ReceiveWithin(ctx context.Context, maxBytes int) (*Delivery, error) {
	for {
		d, ch, next, err := q.pollWithin(true, maxBytes)
		if !errors.Is(err, ErrNoMessage) {
			return d, err
		}
		if err := q.wait(ctx, ch, next); err != nil {
			return nil, err
		}
	}
}

// pollWithin is poll, taking nothing when the head is longer than
// maxBytes.
func (q *Queue) pollWithin(wait bool, maxBytes int) (*Delivery, <-chan struct{}, int64, error) {
	var one [1]*Delivery
	ds, ch, next, err := q.pollN(wait, one[:0], 1, max(maxBytes, 0))
	if err != nil {
		return nil, ch, next, err
	}
	return ds[0], nil, 0, nil
}

// wait blocks until ch is closed, the backoff deadline next (unix nanos,
// 0 for none) passes, ctx is done or the store closes.
func (q *Queue) wait(ctx context.Context, ch <-chan struct{}, next int64) error {
	var timer <-chan time.Time
	if next > 0 {
		t := time.NewTimer(time.Duration(next - q.s.now().UnixNano()))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ch:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	case <-q.s.ctx.Done():
		return ErrClosed
	}
	return nil
}

// poll takes the next deliverable message. When there is none and wait is
// set, it returns the channel that the next arrival closes, taken under the
// same lock so no arrival slips between, and the next backoff deadline.
func (q *Queue) poll(wait bool) (*Delivery, <-chan struct{}, int64, error) {
	var one [1]*Delivery
	ds, ch, next, err := q.pollN(wait, one[:0], 1, -1)
	if err != nil {
		return nil, ch, next, err
	}
	return ds[0], nil, 0, nil
}

// pollN appends to dst up to n deliverable messages, at least one, taken
// under one lock and one reading of the clock: a consumer that keeps up
// with a fan-out takes a copy per publish, and the lock and the clock were
// a fifth of its cost per copy. When there is none it returns dst as it
// was and ErrNoMessage, with, if wait is set, the channel that the next
// arrival closes and the next backoff deadline, as poll does.
//
// With room >= 0 it takes messages only while their encoded bytes fit in
// room; when the first does not, it takes nothing and returns
// ErrTooLarge. It looks at the head before it takes it, under the same
// lock, so the message left is the one that did not fit.
func (q *Queue) pollN(wait bool, dst []*Delivery, n, room int) ([]*Delivery, <-chan struct{}, int64, error) {
	start := len(dst)
	for {
		if q.s.ctx.Err() != nil {
			return dst, nil, 0, ErrClosed
		}
		if q.gone.Load() {
			return dst, nil, 0, fmt.Errorf("queue %q was dropped: %w", q.name, ErrUnknownQueue)
		}
		q.mu.Lock()
		now := q.s.now().UnixNano()
		next := q.promoteLocked(now)
		var expired ref
		hasExpired := false
		tooLarge := false
		for len(dst)-start < n {
			if room >= 0 {
				h, ok, err := q.headLocked(now)
				// An expired head is not delivered: it is taken below,
				// and expired.
				if err == nil && ok && len(h.data) > room && (h.expiresAt == 0 || h.expiresAt > now) {
					tooLarge = true
					break
				}
			}
			e, prio, ok, err := q.nextLocked(now)
			if err != nil || !ok {
				if len(dst) > start {
					// What was taken is returned; an error recurs at the
					// next poll.
					break
				}
				var ch chan struct{}
				if wait {
					q.waiting = true
					ch = q.waitCh
				}
				q.mu.Unlock()
				if err == nil {
					err = ErrNoMessage
				}
				return dst, ch, next, err
			}
			if e.expiresAt > 0 && e.expiresAt <= now {
				expired, hasExpired = refOf(e, prio), true
				break
			}
			dst = append(dst, q.leaseLocked(e, prio, now))
			room -= len(e.data)
		}
		q.mu.Unlock()
		if tooLarge && len(dst) == start {
			return dst, nil, 0, ErrTooLarge
		}
		if hasExpired {
			q.expire(expired)
			if len(dst) == start {
				continue
			}
		}
		return dst, nil, 0, nil
	}
}

// leaseLocked leases entry e of priority prio to a new delivery.
func (q *Queue) leaseLocked(e entry, prio uint8, now int64) *Delivery {
	attempt := e.deliveries + 1
	q.tokens++
	token := q.tokens
	// One allocation for the delivery and its lease: a consumer of a
	// topic's subscription takes one per copy.
	dl := &deliveryLease{
		d: Delivery{q: q, RowID: e.rowid, Attempt: attempt, Priority: prio, Reason: e.reason, Data: e.data, token: token, sh: e.sh},
		l: lease{e: e, prio: prio, attempt: attempt, token: token, deadline: now + int64(q.policy.LeaseTimeout)},
	}
	q.inflight[e.rowid] = &dl.l
	d := &dl.d
	if e.expiresAt > 0 {
		d.ExpiresAt = time.Unix(0, e.expiresAt)
	}
	return d
}

// deliveryLease is a delivery and the lease it holds, allocated together.
type deliveryLease struct {
	d Delivery
	l lease
}

// nextLocked removes and returns the head of the highest non-empty priority,
// refilling spilled levels from disk as it goes.
func (q *Queue) nextLocked(now int64) (entry, uint8, bool, error) {
	p, retry, ok, err := q.findHeadLocked(now)
	if err != nil || !ok {
		return entry{}, 0, false, err
	}
	l := &q.lv[p]
	if retry {
		return heap.Pop(&l.retry).(entry), p, true, nil
	}
	e := l.ready[l.head]
	l.ready[l.head] = entry{}
	l.head++
	if l.head == len(l.ready) {
		l.ready, l.head = l.ready[:0], 0
	}
	q.releaseLocked(e)
	return e, p, true, nil
}

// headLocked returns the entry nextLocked would return next, without
// removing it.
func (q *Queue) headLocked(now int64) (entry, bool, error) {
	p, retry, ok, err := q.findHeadLocked(now)
	if err != nil || !ok {
		return entry{}, false, err
	}
	l := &q.lv[p]
	if retry {
		return l.retry[0], true, nil // the heap's least
	}
	return l.ready[l.head], true, nil
}

// findHeadLocked finds the head of the highest non-empty priority,
// refilling spilled levels from disk as it goes: its priority, and
// whether it is the least of that level's retry heap or the head of its
// ready list.
func (q *Queue) findHeadLocked(now int64) (uint8, bool, bool, error) {
	if q.frozen > 0 {
		return 0, false, false, nil
	}
	for p := levels - 1; p >= 0; p-- {
		l := &q.lv[p]
		if l.head == len(l.ready) && l.spilled {
			if err := q.refillLocked(uint8(p), now); err != nil {
				return 0, false, false, err
			}
		}
		hasReady := l.head < len(l.ready)
		if len(l.retry) > 0 && (!hasReady || l.retry[0].rowid < l.ready[l.head].rowid) {
			return uint8(p), true, true, nil
		}
		if hasReady {
			return uint8(p), false, true, nil
		}
	}
	return 0, false, false, nil
}

// minRefill is the fewest rows a refill reads, whatever the budgets.
const minRefill = 16

// refillLocked reads the next rows of a spilled level from disk, through
// a raw reader connection: this runs for every few hundred messages of a
// backlog, and database/sql's per-row work was most of its cost.
func (q *Queue) refillLocked(p uint8, now int64) error {
	l := &q.lv[p]
	limit := max(q.s.cfg.PrefetchMessages/2, minRefill)
	rc, err := q.s.reader()
	if err != nil {
		return fmt.Errorf("refill %q: %w", q.name, err)
	}
	defer q.s.putReader(rc)
	var missing error
	var items []runItem
	// shs holds the shared bodies of the run being expanded; datas the
	// bodies of a run of single copies.
	var shs []*bodyData
	var datas [][]byte
	// add takes one entry into the level; it reports whether the budgets
	// allow another. Past the store's, a refill still takes minRefill
	// entries, so that a queue whose turn came is never left with none.
	took := 0
	add := func(e entry) bool {
		l.lastLoaded = e.rowid
		if e.notBefore > now {
			heap.Push(&q.delayed, delayed{e: e, prio: p})
		} else {
			l.ready = append(l.ready, e)
			q.holdLocked(e)
		}
		q.refillBytes += len(e.data)
		took++
		return q.refillBytes < q.s.cfg.PrefetchBytes &&
			(took < minRefill || q.s.prefetched.Load() < int64(q.s.cfg.PrefetchTotalBytes))
	}
	n, cut, err := rc.scan(refillSQL, []driver.Value{q.id, int64(p), l.lastLoaded, int64(limit)}, 7, func(row []driver.Value) bool {
		if run, _ := row[6].(int64); run == runMarker || run == singleRunMarker {
			// A run: its copies past what is loaded, in id order.
			var derr error
			if items, derr = decodeRun(items[:0], row[5].([]byte)); derr != nil {
				missing = fmt.Errorf("run %v: %w", row[0], derr)
				return false
			}
			single := run == singleRunMarker
			if single {
				datas, missing = singleBodies(rc, items, l.lastLoaded, datas)
			} else {
				shs, missing = q.bodiesOf(rc, items, l.lastLoaded, shs)
			}
			if missing != nil {
				return false
			}
			key, _ := row[0].(int64)
			for i, it := range items {
				if it.id <= l.lastLoaded {
					continue
				}
				e := entry{rowid: it.id, expiresAt: it.exp, deliveries: int(it.deliv), notBefore: it.notBf, body: it.body, run: key, runLen: len(items)}
				if single {
					e.data = datas[i] // its body is its own (see Delivery.shared)
				} else {
					e.sh = shs[i]
					e.data = e.sh.data
				}
				if !add(e) {
					return false
				}
			}
			return true
		}
		return add(rowEntry(row))
	})
	q.refillBytes = 0
	if err == nil && missing != nil {
		err = fmt.Errorf("read copies: %w", missing)
	}
	if err != nil {
		return fmt.Errorf("refill %q: %w", q.name, err)
	}
	if n < limit && !cut {
		l.spilled = false
	}
	return nil
}

// singleBodies returns the bodies of the copies past lastLoaded of a run
// of single copies (see singleRun), in dst at their copies' index in
// items (nil for the others), read in one range scan in the read
// transaction the refill's open statement holds. Such bodies are never
// cached, their one copy being their only reader; items and bodies both
// come in id order, so the scan's rows are matched by walking both, and
// the bodies are copied into one array, each with its own capacity.
func singleBodies(rc *rawConn, items []runItem, lastLoaded int64, dst [][]byte) ([][]byte, error) {
	dst = append(dst[:0], make([][]byte, len(items))...)
	first := 0
	for first < len(items) && items[first].id <= lastLoaded {
		first++
	}
	if first == len(items) {
		return dst, nil
	}
	// Sized by the run's items, which the file holds: bounded, so that a
	// corrupt size costs no more than a refill's worth up front; the real
	// bytes grow the array past it if they must.
	var size int64
	for _, it := range items[first:] {
		size += min(it.size, maxArenaHint)
	}
	arena := make([]byte, 0, min(size, maxArenaHint))
	i := first
	_, _, err := rc.scan(`SELECT id, data FROM bodies WHERE id BETWEEN ? AND ?`, []driver.Value{items[first].body, items[len(items)-1].body}, 2, func(row []driver.Value) bool {
		id, _ := row[0].(int64)
		for i < len(items) && items[i].body < id {
			i++ // gone: reported below
		}
		if i < len(items) && items[i].body == id {
			data, _ := row[1].([]byte)
			at := len(arena)
			arena = append(arena, data...) // the driver's buffer is reused
			dst[i] = arena[at:len(arena):len(arena)]
			i++
		}
		return i < len(items)
	})
	if err != nil {
		return dst, err
	}
	for j := first; j < len(items); j++ {
		if dst[j] == nil {
			return dst, fmt.Errorf("body %d of copy %d: %w", items[j].body, items[j].id, errNoRows)
		}
	}
	return dst, nil
}

// maxArenaHint caps what singleBodies allocates ahead of the bytes read.
const maxArenaHint = 4 << 20

// bodiesOf returns the shared bodies of the run's copies past
// lastLoaded, in dst, at their copies' index in items (nil for the
// others). It takes them from the cache, all under one lock: a lookup of
// each copy's body, twice, was most of a trailing refill's cost. The
// bodies the cache lacks it reads from the bodies table, in the same read
// transaction as the run, which the refill's open statement holds: in one
// range scan when there are several, since the bodies of a run were
// stored in one commit, so their ids are close.
func (q *Queue) bodiesOf(rc *rawConn, items []runItem, lastLoaded int64, dst []*bodyData) ([]*bodyData, error) {
	dst = append(dst[:0], make([]*bodyData, len(items))...)
	q.s.bodies.getRun(items, lastLoaded, dst)
	n, lo, hi := lacking(items, lastLoaded, dst)
	if n == 0 {
		return dst, nil
	}
	// read holds what was read of the bodies the cache lacks, nil until
	// read; the range may hold other bodies too.
	read := make(map[int64]*bodyData, n)
	for i, it := range items {
		if it.id > lastLoaded && dst[i] == nil {
			read[it.body] = nil
		}
	}
	if n > 1 {
		_, _, err := rc.scan(`SELECT id, data FROM bodies WHERE id BETWEEN ? AND ?`, []driver.Value{lo, hi}, 2, func(row []driver.Value) bool {
			id, _ := row[0].(int64)
			if _, want := read[id]; want {
				data, _ := row[1].([]byte)
				read[id] = &bodyData{id: id, data: append([]byte(nil), data...)} // the driver's buffer is reused
			}
			return true
		})
		if err != nil {
			return dst, err
		}
	}
	body := make([]driver.Value, 1)
	for i, it := range items {
		if it.id <= lastLoaded || dst[i] != nil {
			continue
		}
		sh := read[it.body]
		if sh == nil {
			if err := rc.queryRow(`SELECT data FROM bodies WHERE id = ?`, []driver.Value{it.body}, body); err != nil {
				return dst, err
			}
			sh = &bodyData{id: it.body, data: append([]byte(nil), body[0].([]byte)...)}
			read[it.body] = sh
		}
		q.s.bodies.add(sh)
		dst[i] = sh
	}
	return dst, nil
}

// refillSQL reads the next rows of one priority of a queue, from both of
// its tables, merged in id order: each side is read along its own key.
// A run of copies comes as its items, marked by runMarker, or by
// singleRunMarker for a run of single copies; the copies' bodies are not
// joined: refillLocked takes them from the cache. Runs are contiguous
// (see runs.go), so expanding each in place keeps id order.
const refillSQL = `SELECT id, expires_at, deliveries, not_before, reason, data, 0 FROM messages
	WHERE queue = ?1 AND priority = ?2 AND id > ?3
	UNION ALL
	SELECT id, 0, 0, 0, '', items, CASE WHEN body = -1 THEN -2 ELSE -1 END FROM copies
	WHERE queue = ?1 AND priority = ?2 AND id > ?3
	ORDER BY 1 LIMIT ?4`

// runMarker marks a run in the last column of refillSQL's rows, and
// singleRunMarker a run marked singleRun.
const (
	runMarker       = -1
	singleRunMarker = -2
)

// rowEntry makes an entry of a refill row.
func rowEntry(row []driver.Value) entry {
	var e entry
	e.rowid, _ = row[0].(int64)
	e.expiresAt, _ = row[1].(int64)
	d, _ := row[2].(int64)
	e.deliveries = int(d)
	e.notBefore, _ = row[3].(int64)
	switch r := row[4].(type) {
	case string:
		e.reason = r
	case []byte:
		e.reason = string(r)
	}
	e.data, _ = row[5].([]byte)
	e.body, _ = row[6].(int64)
	return e
}

// leaseOf returns the lease of d if d still holds it. The lease token,
// not the attempt, tells: a message released and delivered again keeps
// its attempt count, and the old delivery must not settle the new one. A
// lease being settled is held by no delivery: it was settled once.
func (q *Queue) leaseOf(d *Delivery) (*lease, error) {
	l := q.inflight[d.RowID]
	if l == nil || l.token != d.token || l.settling {
		return nil, fmt.Errorf("message %d of %q, attempt %d: %w", d.RowID, q.name, d.Attempt, ErrLeaseLost)
	}
	return l, nil
}

// take removes the lease of d if d still holds it (see leaseOf).
func (q *Queue) take(d *Delivery) (*lease, error) {
	l, err := q.leaseOf(d)
	if err != nil {
		return nil, err
	}
	delete(q.inflight, d.RowID)
	return l, nil
}

// settleLocked marks l as settled by a request on its way to the writer:
// the lease stays until the writer commits the request, and comes back if
// the commit fails (see unsettle).
func (q *Queue) settleLocked(l *lease) {
	l.settling = true
	q.settling++
}

// submitSettle hands the writer r, which settles leases of q, and gives
// them back if the writer refuses it.
func (q *Queue) submitSettle(r *request) error {
	r.settle = true
	err := q.s.w.submit(r)
	if err != nil {
		q.unsettle(r)
	}
	return err
}

// settled ends the leases that r settled, once it committed: their rows
// are gone, or moved to another queue.
func (q *Queue) settled(r *request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r.settledRows(func(rowid int64) {
		if l := q.inflight[rowid]; l != nil && l.settling {
			delete(q.inflight, rowid)
			q.settling--
		}
	})
}

// unsettle gives back the leases that r was to settle, when its commit
// failed (a full disk) or it never reached the writer: their rows are
// still stored, and counted, so their messages must be delivered again.
//
// Each lease is left in flight with its deadline passed, so the next
// sweep treats it as a lease timeout: the message goes back to its
// queue ahead of younger messages of its priority (or to the dead-letter
// queue past MaxDeliveries), with the attempt counted (and persisted, if
// the disk has room by then). That
// is the path every lease that is never settled takes already, so no new
// state has to be proved, and the counters stay as the rows are: nothing
// was committed, and nothing in memory changes but the lease's deadline.
// The other ways were worse: retrying the settle until it commits holds
// requests in the writer for as long as the disk stays full, and putting
// the message back at once, here on the writer's goroutine, would have a
// consumer handle and ack it again as fast as commits fail. The writer
// may not submit requests itself (its queue may be full), which a lease
// timeout does; the sweep runs on its own goroutine. A lease held (Hold)
// comes back too: the deadline passed replaces its hold.
func (q *Queue) unsettle(r *request) {
	if r.gathered && !r.taken {
		// The acks the request was to take are still gathered; no other
		// request takes them while ackQueued says this one will.
		r.acks, r.taken = q.takeAcks(), true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.s.now().UnixNano()
	r.settledRows(func(rowid int64) {
		if l := q.inflight[rowid]; l != nil && l.settling {
			l.settling = false
			q.settling--
			l.deadline = now
		}
	})
}

// ack settles a delivery; see Delivery.Ack. The acks of copies (a
// topic's subscriptions) are gathered while one request for them waits
// for the writer, which takes them all when it gets to it: the eight
// consumers of a fan-out to eight subscriptions, acking one by one, cost
// the writer one request per commit and subscription, not one per copy.
// Other acks go one request each: measured with `bench local`, gathering
// them let consumers keep pace with 64 producers, which halved the
// producers' rate and doubled their latency for no gain end to end; a
// request each waits for room in the writer's queue, as a producer's put
// does.
func (q *Queue) ack(d *Delivery) error {
	q.mu.Lock()
	l, err := q.leaseOf(d)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	q.settleLocked(l)
	if l.e.body == 0 {
		q.mu.Unlock()
		return q.submitSettle(&request{kind: reqAck, q: q, ref: refOf(l.e, l.prio)})
	}
	q.acks = append(q.acks, ackOf(q, l))
	if q.ackQueued {
		q.mu.Unlock()
		return nil
	}
	q.ackQueued = true
	q.mu.Unlock()
	return q.submitSettle(&request{kind: reqAck, q: q, gathered: true})
}

// takeAcks hands the writer the acks gathered so far, their array
// itself: the queue gathers the next in the array the writer gave back
// (giveBackAcks), so that thousands of acks per commit are neither copied
// here nor gathered again into an array that grows from nothing.
func (q *Queue) takeAcks() []ackRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	taken := q.acks
	q.acks, q.spareAcks = q.spareAcks[:0], nil
	if q.acks == nil {
		// The writer still holds the other array (its batch is not
		// committed yet): gather into one as large as the last take
		// rather than grow one from nothing, copying as it doubles.
		q.acks = make([]ackRow, 0, cap(taken))
	}
	q.ackQueued = false
	return taken
}

// giveBackAcks gives back an array takeAcks handed out, once its batch is
// committed.
func (q *Queue) giveBackAcks(acks []ackRow) {
	clear(acks)
	q.mu.Lock()
	defer q.mu.Unlock()
	if cap(acks) > cap(q.spareAcks) {
		q.spareAcks = acks[:0]
	}
}

// AckAll settles deliveries of this queue in one store request, as a sender
// does with everything one cumulative ack covers. Deliveries whose lease
// was lost are skipped; the first such error is returned after the rest
// are settled.
func (q *Queue) AckAll(ds []*Delivery) error {
	rows := make([]ackRow, 0, len(ds))
	var first error
	q.mu.Lock()
	for _, d := range ds {
		l, err := q.leaseOf(d)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		q.settleLocked(l)
		rows = append(rows, ackOf(q, l))
	}
	q.mu.Unlock()
	if len(rows) > 0 {
		if err := q.submitSettle(&request{kind: reqAck, q: q, acks: rows}); err != nil {
			return err
		}
	}
	return first
}

// release gives a delivery back at once; see Delivery.Release.
func (q *Queue) release(d *Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	l, err := q.take(d)
	if err != nil {
		return err
	}
	heap.Push(&q.lv[l.prio].retry, l.e)
	q.wakeLocked()
	return nil
}

// nack gives a delivery back after a backoff; see Delivery.Nack.
func (q *Queue) nack(d *Delivery, reason string) error {
	q.mu.Lock()
	l, err := q.leaseOf(d)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	return q.failedLocked(l, reason, false)
}

// failedLocked handles a failed delivery, by nack or lease timeout: the
// message goes to the dead-letter queue past MaxDeliveries, else back to
// the queue after the backoff. l is in inflight, not settling. It unlocks
// q.mu.
func (q *Queue) failedLocked(l *lease, reason string, timedOut bool) error {
	p := q.policy
	if l.attempt >= p.MaxDeliveries && !IsDeadLetter(q.name) {
		q.settleLocked(l)
		q.mu.Unlock()
		why := fmt.Sprintf("delivered %d times (max_deliveries %d): %s", l.attempt, p.MaxDeliveries, reason)
		return q.deadLetterLease(l, p.DeadLetter, why)
	}
	delete(q.inflight, l.e.rowid)
	// The backoff and the delivery count are in memory at once; their
	// update below only persists them, and a failed one loses nothing
	// but the count, which a restart resets.
	now := q.s.now().UnixNano()
	l.e.deliveries = l.attempt
	if timedOut {
		// The lease timeout was the backoff already.
		l.e.notBefore = 0
		heap.Push(&q.lv[l.prio].retry, l.e)
	} else {
		l.e.notBefore = now + int64(backoff(p, l.attempt))
		heap.Push(&q.delayed, delayed{e: l.e, prio: l.prio})
	}
	q.wakeLocked()
	q.mu.Unlock()
	return q.s.w.submit(&request{kind: reqUpdate, q: q, ref: refOf(l.e, l.prio), deliv: l.attempt, notBf: l.e.notBefore})
}

// backoff is RedeliveryDelay doubled per attempt after the first, capped.
func backoff(p Policy, attempt int) time.Duration {
	d := p.RedeliveryDelay
	for i := 1; i < attempt && d < p.MaxRedeliveryDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxRedeliveryDelay)
}

// moveTo moves a message that no delivery holds out of q into the queue
// called to, as expired.
func (q *Queue) moveTo(r ref, to, reason string) error {
	reason = clipReason(reason)
	t, err := q.s.Queue(q.s.ctx, to, KindReceive)
	if err != nil {
		return fmt.Errorf("move message %d of %q to %q: %w", r.rowid, q.name, to, err)
	}
	return q.s.w.submit(&request{kind: reqMove, q: q, ref: r, to: t, name: reason})
}

// deadLetterLease moves the message of lease l, marked settling, to the
// dead-letter queue called to, with reason.
func (q *Queue) deadLetterLease(l *lease, to, reason string) error {
	reason = clipReason(reason)
	r := &request{kind: reqMove, q: q, ref: refOf(l.e, l.prio), name: reason, dlq: true}
	t, err := q.s.Queue(q.s.ctx, to, KindReceive)
	if err != nil {
		// Making the queue is a commit too, which a full disk fails.
		q.unsettle(r)
		return fmt.Errorf("move message %d of %q to %q: %w", r.ref.rowid, q.name, to, err)
	}
	r.to = t
	return q.submitSettle(r)
}

// MaxReason is the most bytes of a reason a moved message keeps (a
// nack's, a dead letter's): an application's reason is stored with the
// message and sent with each of its deliveries, and one of megabytes
// would cost that at every step. A longer one is cut, at a character,
// and says so.
const MaxReason = 4096

// clipReason cuts reason to MaxReason bytes, ending in a note of what
// was cut.
func clipReason(reason string) string {
	if len(reason) <= MaxReason {
		return reason
	}
	note := fmt.Sprintf("... (%d bytes cut)", len(reason))
	cut := MaxReason - len(note)
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + note
}

// expire removes an expired message, or moves it to the expiry address.
// It is idempotent: the sweep and the head may both expire one message.
func (q *Queue) expire(r ref) {
	addr := q.Policy().ExpiryAddress
	var err error
	if addr != "" && addr != q.name {
		err = q.moveTo(r, addr, "expired")
	} else {
		err = q.s.w.submit(&request{kind: reqExpire, q: q, ref: r})
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		q.s.log.Warn("expire failed", slog.String(logkey.Queue, q.name), slog.Int64("rowid", r.rowid), slog.Any(logkey.Error, err))
	}
}

// DeadLetter moves the message to the queue's dead-letter queue at once,
// with reason, as for a message that can never be handled.
func (d *Delivery) DeadLetter(reason string) error { return d.q.deadLetter(d, reason) }

// deadLetter moves a delivered message to the dead-letter queue; see
// Delivery.DeadLetter. In a dead-letter queue it is a nack.
func (q *Queue) deadLetter(d *Delivery, reason string) error {
	q.mu.Lock()
	l, err := q.leaseOf(d)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	if IsDeadLetter(q.name) {
		return q.failedLocked(l, reason, false)
	}
	q.settleLocked(l)
	dlq := q.policy.DeadLetter
	q.mu.Unlock()
	return q.deadLetterLease(l, dlq, reason)
}

// Hold keeps the delivery's lease until it is settled (Ack, Nack,
// Release, DeadLetter), however long that takes: the lease no longer times
// out. A sender holds a file message this way for as long as its content
// is being transferred, which may be hours; the store's lease sweep would
// otherwise deliver it again meanwhile. The lease still ends with the
// process: after a restart the message is delivered again.
func (d *Delivery) Hold() error {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	l, err := q.leaseOf(d)
	if err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	l.deadline = math.MaxInt64
	return nil
}

// Touch starts the delivery's lease again: it times out LeaseTimeout from
// now, whether it was held (Hold) or running. A consumer that holds a
// message until its application takes it (a remote client's buffer)
// starts the lease when it does, so that the time the message waited
// unseen does not count against the application.
func (d *Delivery) Touch() error {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	l, err := q.leaseOf(d)
	if err != nil {
		return fmt.Errorf("touch: %w", err)
	}
	l.deadline = q.s.now().UnixNano() + int64(q.policy.LeaseTimeout)
	return nil
}
