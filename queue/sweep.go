package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// sweepLoop runs Sweep every SweepInterval until ctx is done.
func (s *Store) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Dedupe pruning scans the window, in the writer: every 60th sweep
		// (a minute by default) is soon enough to forget what is past it.
		if err := s.Sweep(ctx, n%60 == 59); err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
			s.log.Warn("sweep failed", slog.Any(logkey.Error, err))
		}
	}
}

// Sweep times out expired leases, wakes consumers for backed-off messages
// whose time came, expires messages wherever they sit in their queue (not
// only at the head), and, with prune, forgets dedupe records past the
// window. The store runs it every SweepInterval; tests call it directly.
func (s *Store) Sweep(ctx context.Context, prune bool) error {
	for _, q := range s.Queues() {
		if err := q.sweepLeases(); err != nil {
			return err
		}
		if prune {
			if err := s.w.submit(&request{kind: reqPrune, q: q}); err != nil {
				return err
			}
		}
	}
	return s.sweepExpired(ctx)
}

// sweepLeases treats every lease past its deadline as a failed delivery.
func (q *Queue) sweepLeases() error {
	q.mu.Lock()
	now := q.s.now().UnixNano()
	before := len(q.delayed)
	q.promoteLocked(now)
	if len(q.delayed) < before {
		q.wakeLocked()
	}
	var late []*lease
	for _, l := range q.inflight {
		if l.deadline <= now && !l.settling {
			late = append(late, l)
		}
	}
	q.mu.Unlock()
	for _, l := range late {
		q.mu.Lock()
		if cur := q.inflight[l.e.rowid]; cur != l || l.settling {
			q.mu.Unlock() // settled meanwhile
			continue
		}
		if err := q.failedLocked(l, "lease timed out", true); err != nil {
			return err
		}
	}
	return nil
}

// sweepExpired expires a bounded number of messages whose TTL ran out,
// skipping those in flight: a consumer already has them.
func (s *Store) sweepExpired(ctx context.Context) error {
	now := s.now().UnixNano()
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, queue, priority, 0, length(data), NULL FROM messages
		WHERE expires_at > 0 AND expires_at <= ?1
		UNION ALL
		SELECT id, queue, priority, 1, 0, items FROM copies
		WHERE expires_at > 0 AND expires_at <= ?1
		LIMIT 10000`, now)
	if err != nil {
		return fmt.Errorf("sweep expired: %w", err)
	}
	type hit struct {
		queue int64
		r     ref
	}
	var hits []hit
	var items []runItem
	for rows.Next() {
		var h hit
		var prio, isRun int64
		var blob []byte
		if err := rows.Scan(&h.r.rowid, &h.queue, &prio, &isRun, &h.r.size, &blob); err != nil {
			rows.Close()
			return fmt.Errorf("sweep expired: %w", err)
		}
		h.r.prio = uint8(prio)
		if isRun == 0 {
			hits = append(hits, h)
			continue
		}
		// A run: those of its copies that expired.
		if items, err = decodeRun(items[:0], blob); err != nil {
			rows.Close()
			return fmt.Errorf("sweep expired: run %d: %w", h.r.rowid, err)
		}
		for _, it := range items {
			if it.exp > 0 && it.exp <= now {
				hits = append(hits, hit{queue: h.queue, r: ref{rowid: it.id, prio: h.r.prio, body: it.body, size: it.size}})
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sweep expired: %w", err)
	}
	for _, h := range hits {
		s.mu.RLock()
		q := s.queues[h.queue]
		s.mu.RUnlock()
		if q == nil {
			continue
		}
		q.mu.Lock()
		_, busy := q.inflight[h.r.rowid]
		q.mu.Unlock()
		if !busy {
			// The copy in memory, if any, is dropped when it reaches the
			// head: expiring twice is a no-op.
			q.expire(h.r)
		}
	}
	return nil
}
