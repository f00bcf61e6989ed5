package queue

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// Check passes on a store that went through puts, acks and a dead letter,
// and names the queue whose stored counters were made to differ from its
// rows, and rows of no queue.
func TestCheckFindsCountersThatDifferFromRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	s := openAt(t, path, nil)
	q := mustQueue(t, s, "orders", KindReceive)
	for _, b := range []string{"a", "b", "c"} {
		mustPut(t, q, msg(4, b))
	}
	d, err := q.Poll()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if d, err = q.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := d.DeadLetter("test"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, path); err != nil {
		t.Fatalf("a store used normally: %v", err)
	}
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec := func(query string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`UPDATE queues SET depth = depth + 1 WHERE name = 'orders'`)
	err = Check(ctx, path)
	if !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), `"orders"`) {
		t.Fatalf("depth one above the rows: %v", err)
	}
	mustExec(`UPDATE queues SET depth = depth - 1 WHERE name = 'orders'`)
	mustExec(`INSERT INTO messages (queue, priority, expires_at, data) VALUES (999, 4, 0, x'00')`)
	if err := Check(ctx, path); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "1 rows of no queue") {
		t.Fatalf("a row of no queue: %v", err)
	}
	if err := Check(ctx, filepath.Join(t.TempDir(), "none.db")); err == nil || errors.Is(err, ErrInconsistent) {
		t.Fatalf("a store that does not exist: %v", err)
	}
}
