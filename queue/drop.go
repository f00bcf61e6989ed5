package queue

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// Drop deletes q from the store: its messages, in flight or not, its
// dedupe window and its row, in one transaction, and returns how many
// messages it deleted. Dropping a queue dropped already is a no-op.
//
// Once Drop returned, q is gone: Poll and Receive on it return
// ErrUnknownQueue, settling its deliveries returns ErrLeaseLost, Lookup no
// longer finds it, and a put into it fails with ErrUnknownQueue, unless
// the put is Optional, which is then skipped. A put submitted before the
// drop is stored, then dropped with the rest.
func (s *Store) Drop(ctx context.Context, q *Queue) (int, error) {
	r := &request{kind: reqDrop, q: q, op: newOp()}
	if err := s.w.submit(r); err != nil {
		return 0, fmt.Errorf("drop queue %q: %w", q.name, err)
	}
	if err := r.op.Wait(ctx); err != nil {
		return 0, fmt.Errorf("drop queue %q: %w", q.name, err)
	}
	return r.n, nil
}

// applyDrop deletes r.q's rows, dedupe window and queue row. What the
// batch put or acked before it is written first, so that the count and
// the writer's totals stay true.
func (w *writer) applyDrop(r *request, b *batch) error {
	b.dedupeForget = true
	q := r.q
	if q.gone.Load() || b.dropped[q] {
		return nil
	}
	if err := w.flushInserts(b); err != nil {
		return err
	}
	if err := w.flushAcks(b); err != nil {
		return err
	}
	dest := make([]driver.Value, 2)
	if err := w.conn.queryRow(queueSizeSQL, []driver.Value{q.id}, dest); err != nil {
		return fmt.Errorf("drop queue %q: %w", q.name, err)
	}
	n, _ := dest[0].(int64)
	size, _ := dest[1].(int64)
	w.lastRuns = nil // the queue's are gone; a drop is rare
	err := scanRuns(w.conn.scan, `DELETE FROM copies WHERE queue = ? RETURNING queue, priority, id, items`, []driver.Value{q.id}, func(r run) error {
		for _, it := range r.items {
			w.unref(it.body)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop queue %q: %w", q.name, err)
	}
	for _, stmt := range []string{`DELETE FROM messages WHERE queue = ?`, `DELETE FROM dedupe_runs WHERE queue = ?`, `DELETE FROM queues WHERE id = ?`} {
		if _, err := w.conn.exec(stmt, q.id); err != nil {
			return fmt.Errorf("drop queue %q: %w", q.name, err)
		}
	}
	// The writer's totals move by the delta; the queue's own counters
	// die with it (writeCounters updates no row).
	d := b.delta(q)
	d.depth -= n
	d.bytes -= size
	if b.dropped == nil {
		b.dropped = map[*Queue]bool{}
	}
	b.dropped[q] = true
	r.n = int(n)
	return nil
}

// dropped is called by the writer once a drop committed: q leaves the
// store's maps, its memory is freed and its waiters are woken to find it
// gone.
func (s *Store) dropped(q *Queue) {
	s.mu.Lock()
	if s.byName[q.name] == q {
		delete(s.byName, q.name)
	}
	delete(s.queues, q.id)
	s.mu.Unlock()
	q.mu.Lock()
	q.gone.Store(true)
	q.inflight, q.settling = map[int64]*lease{}, 0
	q.lv = [levels]level{}
	q.delayed = nil
	q.s.prefetched.Add(-int64(q.readyCostLocked()))
	q.bufN, q.bufBytes = 0, 0
	q.wakeLocked()
	q.mu.Unlock()
}

// skipPut reports whether put p of r must be left out because its queue is
// gone (or goes in this batch); it rejects r when p is not Optional.
func (w *writer) skipPut(r *request, p Put, b *batch) (skip, reject bool) {
	if !p.Queue.gone.Load() && !b.dropped[p.Queue] {
		return false, false
	}
	if p.Optional {
		return true, false
	}
	b.reject(r, fmt.Errorf("put into %q: %w", p.Queue.name, ErrUnknownQueue))
	return true, true
}
