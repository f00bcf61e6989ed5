package queue

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"

	"github.com/petrelmq/petrel/internal/logkey"
)

// batch collects what one transaction did, to publish after its commit.
type batch struct {
	appends  []appendEffect
	deltas   map[*Queue]*counters
	created  []*Queue
	done     []*request
	parked   []*request
	rejected map[*request]error
	deduped  map[*request][]bool // set by admit: puts that are duplicates
	full     map[*request]bool   // set by admit: puts past the store's limits
	thaws    []*frozenQueue      // queues frozen by purges and moves; see freeze
	dropped  map[*Queue]bool     // queues this batch drops; see applyDrop
}

type appendEffect struct {
	q    *Queue
	prio uint8
	e    entry
}

func newBatch() *batch {
	return &batch{deltas: map[*Queue]*counters{}}
}

func (b *batch) delta(q *Queue) *counters {
	d := b.deltas[q]
	if d == nil {
		d = &counters{}
		b.deltas[q] = d
	}
	return d
}

func (b *batch) reject(r *request, err error) {
	if b.rejected == nil {
		b.rejected = map[*request]error{}
	}
	b.rejected[r] = err
}

// fullAfter reports whether storing n more messages of size bytes, after
// msgs messages of pending bytes, would pass the configured limits.
func (w *writer) fullAfter(msgs, pending, n, size int64) bool {
	c := w.s.cfg
	if c.MaxMessages > 0 && w.msgs.Load()+msgs+n > c.MaxMessages {
		return true
	}
	return c.MaxBytes > 0 && w.bytes.Load()+pending+size > c.MaxBytes
}

// applyPut stores r's messages, or parks r (FullBlock) or rejects it
// (FullError) when the store is past its limits.
func (w *writer) applyPut(r *request, b *batch) (parked bool, err error) {
	size := putBytes(r)
	if b.full[r] {
		if w.s.cfg.OnFull == FullBlock {
			b.parked = append(b.parked, r)
			return true, nil
		}
		b.reject(r, fmt.Errorf("put %d messages (%d bytes): %w", len(r.puts), size, ErrStoreFull))
		return false, nil
	}
	for _, p := range r.puts {
		if _, reject := w.skipPut(r, p, b); reject {
			return false, nil
		}
	}
	now := w.s.now().UnixNano()
	deduped := b.deduped[r]
	for i, p := range r.puts {
		q := p.Queue
		if skip, _ := w.skipPut(r, p, b); skip {
			continue
		}
		if p.Dedupe {
			if deduped != nil && deduped[i] {
				b.delta(q).deduped++
				continue
			}
			b.delta(q).dedupeEntries++
		}
		var exp int64
		if p.Msg.TTL > 0 {
			exp = now + int64(p.Msg.TTL)
		}
		w.lastRow++
		id := w.lastRow
		w.pending = append(w.pending, id, q.id, int64(p.Msg.Priority), exp, p.Data)
		b.appends = append(b.appends, appendEffect{q: q, prio: p.Msg.Priority, e: entry{rowid: id, expiresAt: exp, data: p.Data}})
		d := b.delta(q)
		d.depth++
		d.bytes += int64(len(p.Data))
		d.enqueued++
	}
	return false, nil
}

// applyAck queues r's delete for flushAcks.
func (w *writer) applyAck(r *request) {
	if r.acks != nil {
		w.acks = append(w.acks, r.acks...)
		return
	}
	w.acks = append(w.acks, ackRow{q: r.q, rowid: r.rowid, size: r.size})
}

type ackRow struct {
	q     *Queue
	rowid int64
	size  int64
}

const deleteMaxRows = 64

// deleteSQL[n] deletes n rows by id.
var deleteSQL = func() []string {
	out := make([]string, deleteMaxRows+1)
	for n := 1; n <= deleteMaxRows; n++ {
		out[n] = `DELETE FROM messages WHERE id IN ` + valuesSQL(1, n)
	}
	return out
}()

// flushAcks deletes the acked rows, many per statement, queue by queue.
func (w *writer) flushAcks(b *batch) error {
	acks := w.acks
	w.acks = w.acks[:0]
	for len(acks) > 0 {
		q := acks[0].q
		n := 0
		for n < len(acks) && n < deleteMaxRows && acks[n].q == q {
			n++
		}
		chunk := acks[:n]
		acks = acks[n:]
		args := w.scratch[:0]
		var size int64
		for _, a := range chunk {
			args = append(args, a.rowid)
			size += a.size
		}
		w.scratch = args
		changed, err := w.conn.exec(deleteSQL[n], args...)
		if err != nil {
			return fmt.Errorf("ack %d messages in %q: %w", n, q.name, err)
		}
		d := b.delta(q)
		d.acked += changed
		if changed == int64(n) {
			d.depth -= changed
			d.bytes -= size
			continue
		}
		// A lease makes each ack unique, so this is a bug elsewhere;
		// keep the counters true rather than guess.
		w.s.log.Warn("acked messages were already gone", slog.String(logkey.Queue, q.name), slog.Int("acked", n), slog.Int64("deleted", changed))
		if err := w.resync(q, d); err != nil {
			return err
		}
	}
	return nil
}

// resync sets q's pending depth and bytes deltas so that after the commit
// its counters equal what the table holds.
func (w *writer) resync(q *Queue, d *counters) error {
	dest := make([]driver.Value, 2)
	if err := w.conn.queryRow(`SELECT count(*), coalesce(sum(length(data)), 0) FROM messages WHERE queue = ?`, []driver.Value{q.id}, dest); err != nil {
		return fmt.Errorf("recount %q: %w", q.name, err)
	}
	depth, _ := dest[0].(int64)
	bytes, _ := dest[1].(int64)
	q.mu.Lock()
	cur := q.c
	q.mu.Unlock()
	d.depth = depth - cur.depth
	d.bytes = bytes - cur.bytes
	return nil
}

// applyMove moves a message to another queue (dead letter, expiry address)
// under a new rowid, so it joins the tail of its new queue; or, for an
// expiry with no address, deletes it. A message already gone is a no-op,
// which makes expiry from the sweep and from the head idempotent.
func (w *writer) applyMove(r *request, b *batch) error {
	if r.to == nil {
		n, err := w.conn.exec(`DELETE FROM messages WHERE id = ?`, r.rowid)
		if err != nil {
			return fmt.Errorf("expire %d in %q: %w", r.rowid, r.q.name, err)
		}
		if n == 1 {
			d := b.delta(r.q)
			d.depth--
			d.bytes -= r.size
			d.expired++
		}
		return nil
	}
	dest := make([]driver.Value, 2)
	err := w.conn.queryRow(`SELECT priority, data FROM messages WHERE id = ?`, []driver.Value{r.rowid}, dest)
	if errors.Is(err, errNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("move %d from %q: %w", r.rowid, r.q.name, err)
	}
	prio, _ := dest[0].(int64)
	data, _ := dest[1].([]byte)
	data = append([]byte(nil), data...) // the driver's buffer is reused
	w.lastRow++
	id := w.lastRow
	if _, err := w.conn.exec(`INSERT INTO messages (id, queue, priority, expires_at, reason, data) VALUES (?, ?, ?, 0, ?, ?)`,
		id, r.to.id, prio, r.name, data); err != nil {
		return fmt.Errorf("move %d to %q: %w", r.rowid, r.to.name, err)
	}
	if _, err := w.conn.exec(`DELETE FROM messages WHERE id = ?`, r.rowid); err != nil {
		return fmt.Errorf("move %d from %q: %w", r.rowid, r.q.name, err)
	}
	size := int64(len(data))
	src, dst := b.delta(r.q), b.delta(r.to)
	src.depth--
	src.bytes -= size
	if r.dlq {
		src.deadLettered++
	} else {
		src.expired++
	}
	dst.depth++
	dst.bytes += size
	dst.enqueued++
	b.appends = append(b.appends, appendEffect{q: r.to, prio: uint8(prio), e: entry{rowid: id, reason: r.name, data: data}})
	return nil
}

func (w *writer) applyCreate(r *request, b *batch) error {
	if q, ok := w.s.Lookup(r.name); ok && !q.gone.Load() && !b.dropped[q] {
		return nil
	}
	for _, q := range b.created {
		if q.name == r.name {
			return nil
		}
	}
	dest := make([]driver.Value, 1)
	err := w.conn.queryRow(`INSERT INTO queues (name, kind) VALUES (?, ?) RETURNING id`, []driver.Value{r.name, int64(r.qkind)}, dest)
	if err != nil {
		return fmt.Errorf("create queue %q: %w", r.name, err)
	}
	id := dest[0].(int64)
	q := newQueue(w.s, id, r.name, r.qkind)
	// A queue made now has no rows on disk (a dropped queue's rows went
	// with it), so its first polls need not look there: with many send
	// queues made at once, those empty refills were a tenth of the work.
	for i := range q.lv {
		q.lv[i].spilled = false
	}
	b.created = append(b.created, q)
	return nil
}

// applyPrune forgets a queue's dedupe records older than the window, and,
// past DedupeMaxEntries, the oldest until a tenth of the room is free, so
// that the (scanning) count prune runs rarely.
func (w *writer) applyPrune(r *request, b *batch) error {
	c := w.s.cfg
	cutoff := w.s.now().Add(-c.DedupeWindow).UnixNano()
	byAge, err := w.conn.exec(`DELETE FROM dedupe WHERE queue = ? AND at < ?`, r.q.id, cutoff)
	if err != nil {
		return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
	}
	r.q.mu.Lock()
	entries := r.q.c.dedupeEntries + b.delta(r.q).dedupeEntries - byAge
	r.q.mu.Unlock()
	var byCount int64
	if max := int64(c.DedupeMaxEntries); entries > max {
		keep := max - max/10
		dest := make([]driver.Value, 1)
		err := w.conn.queryRow(`SELECT at FROM dedupe WHERE queue = ? ORDER BY at DESC LIMIT 1 OFFSET ?`, []driver.Value{r.q.id, keep}, dest)
		if err != nil && !errors.Is(err, errNoRows) {
			return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
		}
		if at, ok := dest[0].(int64); ok {
			if byCount, err = w.conn.exec(`DELETE FROM dedupe WHERE queue = ? AND at <= ?`, r.q.id, at); err != nil {
				return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
			}
		}
	}
	if n := byCount + byAge; n > 0 {
		b.delta(r.q).dedupeEntries -= n
	}
	return nil
}

// retryParked runs the parked puts again now that a commit may have freed
// space. Those still over the limit park again.
func (w *writer) retryParked() {
	parked := w.parked
	w.parked = nil
	for i, r := range parked {
		if w.fullAfter(0, 0, int64(len(r.puts)), putBytes(r)) {
			w.parked = append(w.parked, parked[i:]...)
			return
		}
		w.run([]*request{r})
	}
}

func putBytes(r *request) int64 {
	var n int64
	for _, p := range r.puts {
		n += int64(len(p.Data))
	}
	return n
}
