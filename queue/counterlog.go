package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
)

// The counter log.
//
// A queue's counters (depth, bytes, enqueued, acked, ...) are persisted in
// the transaction that changes them, so that they are exact after a
// crash. Written as one UPDATE of its queues row for each queue a commit
// touched, that cost grew with the queues a commit touched, not with what
// it carried: a commit to a thousand send queues, a message or two each,
// spent a third of its writer's time on a thousand UPDATEs of nine values.
//
// So a commit that touches more than one queue appends its deltas instead,
// as one row of counter_log, and the writer keeps the sum of the log's rows
// in memory. Every foldEvery rows, once the log names foldQueues queues,
// and in any commit that drops a queue, that commit folds the sum into
// queues (one UPDATE per queue it names) and empties the log, in its
// transaction: a dropped queue's id may be given to a new queue, and by
// then no row of the log may name it. A store opened after a crash folds
// what its log holds before it loads its queues; Check adds it to what
// queues holds.
//
// A row's deltas, queue after queue:
//
//	+---------------+------+------------------------------------+
//	| queue id      | mask | each field whose mask bit is set,  |
//	| (uvarint)     | byte | in field order (varint)            |
//	+---------------+------+------------------------------------+
//
// Bit i of the mask stands for field i of counterFields: depth, bytes,
// enqueued, acked, expired, deduped, dead_lettered, overflowed.

// foldEvery is how many rows the log holds before a commit folds it.
const foldEvery = 64

// foldQueues is how many queues the log may name before a commit folds
// it, whatever its rows: a fold updates each queue the log names, in one
// commit, and commits that each touch other queues would otherwise make
// that one commit as slow as 64 of theirs. A variable for the tests.
var foldQueues = 4096

// counterFields are the counters' persisted fields, in the order of the
// queues table's columns and of a log row's mask bits.
func counterFields(c *counters) [8]*int64 {
	return [8]*int64{&c.depth, &c.bytes, &c.enqueued, &c.acked, &c.expired, &c.deduped, &c.deadLettered, &c.overflowed}
}

// updateCountersSQL adds one queue's deltas to its row.
const updateCountersSQL = `UPDATE queues SET depth = depth + ?, bytes = bytes + ?, enqueued = enqueued + ?, acked = acked + ?,
	expired = expired + ?, deduped = deduped + ?, dead_lettered = dead_lettered + ?, overflowed = overflowed + ? WHERE id = ?`

// appendCounterDeltas appends one queue's deltas to a log row.
func appendCounterDeltas(dst []byte, id int64, c *counters) []byte {
	dst = binary.AppendUvarint(dst, uint64(id))
	fields := counterFields(c)
	var mask byte
	for i, f := range fields {
		if *f != 0 {
			mask |= 1 << i
		}
	}
	dst = append(dst, mask)
	for _, f := range fields {
		if *f != 0 {
			dst = binary.AppendVarint(dst, *f)
		}
	}
	return dst
}

var errCounterLog = errors.New("counter log row malformed")

// decodeCounterLog adds a log row's deltas to into, by queue id.
func decodeCounterLog(row []byte, into map[int64]*counters) error {
	for len(row) > 0 {
		id, n := binary.Uvarint(row)
		if n <= 0 || id == 0 || id > 1<<62 {
			return errCounterLog
		}
		row = row[n:]
		if len(row) == 0 {
			return errCounterLog
		}
		mask := row[0]
		row = row[1:]
		c := into[int64(id)]
		if c == nil {
			c = &counters{}
			into[int64(id)] = c
		}
		for i, f := range counterFields(c) {
			if mask&(1<<i) == 0 {
				continue
			}
			v, n := binary.Varint(row)
			if n <= 0 {
				return errCounterLog
			}
			row = row[n:]
			*f += v
		}
	}
	return nil
}

// readCounterLog sums the log's rows by queue id.
func readCounterLog(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[int64]*counters, error) {
	rows, err := q.QueryContext(ctx, `SELECT deltas FROM counter_log ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read counter log: %w", err)
	}
	defer rows.Close()
	sums := map[int64]*counters{}
	for rows.Next() {
		var row []byte
		if err := rows.Scan(&row); err != nil {
			return nil, fmt.Errorf("read counter log: %w", err)
		}
		if err := decodeCounterLog(row, sums); err != nil {
			return nil, fmt.Errorf("read counter log: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read counter log: %w", err)
	}
	return sums, nil
}

// foldCounterLog folds what the log holds into queues at open, before
// they are loaded.
func foldCounterLog(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fold counter log: %w", err)
	}
	defer tx.Rollback()
	sums, err := readCounterLog(ctx, tx)
	if err != nil || len(sums) == 0 {
		return err
	}
	for id, c := range sums {
		args := make([]any, 0, 9)
		for _, f := range counterFields(c) {
			args = append(args, *f)
		}
		if _, err := tx.ExecContext(ctx, updateCountersSQL, append(args, id)...); err != nil {
			return fmt.Errorf("fold counter log: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM counter_log`); err != nil {
		return fmt.Errorf("fold counter log: %w", err)
	}
	return tx.Commit()
}

// writeCounters persists b's deltas: by their queues' rows when b touches
// one queue, by a row of the log when it touches more, and by folding the
// log with them when the log is full or b drops a queue. A dropped
// queue's deltas are left out: its row is gone, and its id may already
// be a new queue's.
func (w *writer) writeCounters(b *batch) error {
	live := 0
	for q := range b.deltas {
		if !b.dropped[q] {
			live++
		}
	}
	switch {
	case live == 0 && b.dropped == nil:
		return nil
	case live == 1 && b.dropped == nil:
		return w.updateCounters(b.deltas, b)
	case b.dropped == nil && w.logRows+1 < foldEvery && len(w.logged) < foldQueues:
		w.counterRow = w.counterRow[:0]
		for q, d := range b.deltas {
			w.counterRow = appendCounterDeltas(w.counterRow, q.id, d)
		}
		if _, err := w.conn.exec(`INSERT INTO counter_log (deltas) VALUES (?)`, w.counterRow); err != nil {
			return fmt.Errorf("log the counters of %d queues: %w", live, err)
		}
		b.counters = counterLogged
		return nil
	}
	if err := w.updateCounters(w.logged, b); err != nil {
		return err
	}
	if err := w.updateCounters(b.deltas, b); err != nil {
		return err
	}
	if w.logRows > 0 {
		if _, err := w.conn.exec(`DELETE FROM counter_log`); err != nil {
			return fmt.Errorf("fold the counter log: %w", err)
		}
	}
	b.counters = counterFolded
	return nil
}

// updateCounters adds deltas to their queues' rows, but for the queues
// that b drops or that are gone.
func (w *writer) updateCounters(deltas map[*Queue]*counters, b *batch) error {
	args := make([]driver.Value, 9)
	for q, d := range deltas {
		if b.dropped[q] || q.gone.Load() {
			continue
		}
		for i, f := range counterFields(d) {
			args[i] = *f
		}
		args[8] = q.id
		if _, err := w.conn.exec(updateCountersSQL, args...); err != nil {
			return fmt.Errorf("update counters of %q: %w", q.name, err)
		}
	}
	return nil
}

// countersCommitted keeps the writer's sum of the log true once b
// committed.
func (w *writer) countersCommitted(b *batch) {
	switch b.counters {
	case counterFolded:
		clear(w.logged)
		w.logRows = 0
	case counterLogged:
		if w.logged == nil {
			w.logged = map[*Queue]*counters{}
		}
		for q, d := range b.deltas {
			s := w.logged[q]
			if s == nil {
				s = &counters{}
				w.logged[q] = s
			}
			sf := counterFields(s)
			for i, f := range counterFields(d) {
				*sf[i] += *f
			}
		}
		w.logRows++
	}
}
