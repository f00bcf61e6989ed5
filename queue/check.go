package queue

import (
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
	rows, err := db.QueryContext(ctx, `
SELECT q.name, q.depth, q.bytes,
	(SELECT count(*) FROM messages WHERE queue = q.id) + (SELECT count(*) FROM copies WHERE queue = q.id),
	(SELECT coalesce(sum(length(data)), 0) FROM messages WHERE queue = q.id) +
	(SELECT coalesce(sum(length(b.data)), 0) FROM copies c JOIN bodies b ON b.id = c.body WHERE c.queue = q.id)
FROM queues q ORDER BY q.name`)
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var depth, bytes, n, size int64
		if err := rows.Scan(&name, &depth, &bytes, &n, &size); err != nil {
			return fmt.Errorf("check store %s: %w", path, err)
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
	// should have been freed with its last one.
	for _, c := range []struct{ sql, what string }{
		{`SELECT count(*) FROM copies WHERE queue NOT IN (SELECT id FROM queues)`, "copies of no queue"},
		{`SELECT count(*) FROM copies WHERE body NOT IN (SELECT id FROM bodies)`, "copies of no body"},
		{`SELECT count(*) FROM bodies WHERE id NOT IN (SELECT body FROM copies)`, "shared bodies of no copy"},
	} {
		var n int64
		if err := db.QueryRowContext(ctx, c.sql).Scan(&n); err != nil {
			return fmt.Errorf("check store %s: %w", path, err)
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", n, c.what))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("check store %s: %s: %w", path, strings.Join(problems, "; "), ErrInconsistent)
	}
	return nil
}
