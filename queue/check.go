package queue

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrInconsistent is returned by Check when a queue's stored depth or
// bytes differ from the rows it holds, or a row belongs to no queue.
var ErrInconsistent = errors.New("store inconsistent")

// Check reads the store at path and compares each queue's persisted depth
// and bytes with the rows of the messages and copies tables, which every
// committed transaction keeps equal (see the schema), and that every
// shared body has a copy and every copy its body. It opens the database
// read-only and changes nothing; call it on a store no Store has open, so
// that no transaction is half-way. Tests run it after every node they
// open; an operator may run it on a copy.
func Check(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, true))
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	defer db.Close()
	var problems []string
	// What the counter log holds is part of each queue's counters. A
	// store of a schema before the log has none.
	logged := map[int64]*counters{}
	var hasLog int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'counter_log'`).Scan(&hasLog); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if hasLog > 0 {
		if logged, err = readCounterLog(ctx, db); err != nil {
			return fmt.Errorf("check store %s: %w", path, err)
		}
	}
	rows, err := db.QueryContext(ctx, `
SELECT q.id, q.name, q.depth, q.bytes,
	(SELECT count(*) FROM messages WHERE queue = q.id) + (SELECT coalesce(sum(n), 0) FROM copies WHERE queue = q.id),
	(SELECT coalesce(sum(length(data)), 0) FROM messages WHERE queue = q.id) +
	(SELECT coalesce(sum(size), 0) FROM copies WHERE queue = q.id)
FROM queues q ORDER BY q.name`)
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var id, depth, bytes, n, size int64
		if err := rows.Scan(&id, &name, &depth, &bytes, &n, &size); err != nil {
			return fmt.Errorf("check store %s: %w", path, err)
		}
		if c := logged[id]; c != nil {
			depth += c.depth
			bytes += c.bytes
		}
		if depth != n || bytes != size {
			problems = append(problems, fmt.Sprintf("queue %q: depth %d and bytes %d stored, %d rows of %d bytes held", name, depth, bytes, n, size))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	var orphans int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE queue NOT IN (SELECT id FROM queues)`).Scan(&orphans); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if orphans > 0 {
		problems = append(problems, fmt.Sprintf("%d rows of no queue", orphans))
	}
	// A copy needs its queue and its body; a body needs a copy, or it
	// should have been freed with its last one. A run must decode and
	// agree with its count, bytes, key and expiry.
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM copies WHERE queue NOT IN (SELECT id FROM queues)`).Scan(&n); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if n > 0 {
		problems = append(problems, fmt.Sprintf("%d runs of copies of no queue", n))
	}
	runProblems, err := checkRuns(ctx, db)
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	problems = append(problems, runProblems...)
	dedupeProblems, err := checkDedupeRuns(ctx, db)
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	problems = append(problems, dedupeProblems...)
	if len(problems) > 0 {
		return fmt.Errorf("check store %s: %s: %w", path, strings.Join(problems, "; "), ErrInconsistent)
	}
	return nil
}

// checkRuns decodes every run of copies and checks it against its row,
// and the bodies against the copies that refer to them.
func checkRuns(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT queue, priority, id, expires_at, n, size, items, body FROM copies ORDER BY queue, priority, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var problems []string
	refs := map[int64]int64{}
	// inSingle lists the bodies of runs marked singleRun, each of which
	// must have no other copy: the writer does not count them at open.
	var inSingle []int64
	var items []runItem
	var lastQ, lastPrio, lastKey int64 = -1, -1, 0
	for rows.Next() {
		var q, prio, key, exp, n, size, mark int64
		var blob []byte
		if err := rows.Scan(&q, &prio, &key, &exp, &n, &size, &blob, &mark); err != nil {
			return nil, err
		}
		if items, err = decodeRun(items[:0], blob); err != nil {
			problems = append(problems, fmt.Sprintf("run %d of queue %d: %v", key, q, err))
			continue
		}
		k, e, s := runMeta(items)
		if k != key || e != exp || s != size || n != int64(len(items)) {
			problems = append(problems, fmt.Sprintf("run %d of queue %d: row says key %d, expiry %d, %d copies of %d bytes; items say %d, %d, %d of %d",
				key, q, key, exp, n, size, k, e, len(items), s))
		}
		for _, it := range items {
			refs[it.body]++
			if mark == singleRun {
				inSingle = append(inSingle, it.body)
			}
		}
		// Runs are contiguous (see runs.go): none overlaps the one before
		// it, and no row of messages of the same queue and priority lies
		// within one.
		first := items[0].id
		if q == lastQ && prio == lastPrio && first <= lastKey {
			problems = append(problems, fmt.Sprintf("run %d of queue %d overlaps the run %d before it", key, q, lastKey))
		}
		lastQ, lastPrio, lastKey = q, prio, key
		var inside int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE queue = ? AND priority = ? AND id BETWEEN ? AND ?`,
			q, prio, first, key).Scan(&inside); err != nil {
			return nil, err
		}
		if inside > 0 {
			problems = append(problems, fmt.Sprintf("run %d of queue %d spans %d rows of messages", key, q, inside))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var shared int
	for _, id := range inSingle {
		if refs[id] > 1 {
			shared++
		}
	}
	if shared > 0 {
		problems = append(problems, fmt.Sprintf("%d bodies in runs of single copies have other copies", shared))
	}
	bodies := map[int64]bool{}
	brows, err := db.QueryContext(ctx, `SELECT id FROM bodies`)
	if err != nil {
		return nil, err
	}
	defer brows.Close()
	var unused int
	for brows.Next() {
		var id int64
		if err := brows.Scan(&id); err != nil {
			return nil, err
		}
		bodies[id] = true
		if refs[id] == 0 {
			unused++
		}
	}
	if err := brows.Err(); err != nil {
		return nil, err
	}
	var orphans int
	for id := range refs {
		if !bodies[id] {
			orphans++
		}
	}
	if orphans > 0 {
		problems = append(problems, fmt.Sprintf("%d copies of no body", orphans))
	}
	if unused > 0 {
		problems = append(problems, fmt.Sprintf("%d bodies of no copy", unused))
	}
	return problems, nil
}

// checkDedupeRuns decodes every run of dedupe ids against its row, and
// checks that the runs of one queue and origin span ids apart: the lookup
// of an id reads only the first run that ends at or past it.
func checkDedupeRuns(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT queue, origin, min_id, max_id, n, ids FROM dedupe_runs ORDER BY queue, origin, max_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var problems []string
	var lastQ, lastMax int64 = -1, 0
	var lastOrigin []byte
	var ids []int64
	for rows.Next() {
		var q, minID, maxID, n int64
		var origin, blob []byte
		if err := rows.Scan(&q, &origin, &minID, &maxID, &n, &blob); err != nil {
			return nil, err
		}
		if ids, err = decodeDedupeRun(ids[:0], minID, maxID, n, blob); err != nil {
			problems = append(problems, fmt.Sprintf("dedupe run %d of queue %d: %v", maxID, q, err))
		}
		if q == lastQ && bytes.Equal(origin, lastOrigin) && minID <= lastMax {
			problems = append(problems, fmt.Sprintf("dedupe run %d of queue %d begins at %d, within the run before it, which ends at %d", maxID, q, minID, lastMax))
		}
		lastQ, lastOrigin, lastMax = q, origin, maxID
	}
	return problems, rows.Err()
}
