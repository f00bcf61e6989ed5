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
	db := closeCheckedAndOpen(t, s, path)
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

// Check finds a body that a run marked as single copies shares with
// another copy: the writer would not count it at open, and would free it
// with the first copy acked.
func TestCheckFindsSharedBodyInSingleRun(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	s := openAt(t, path, nil)
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	mustPut(t, a, msg(4, "single"))
	m := msg(4, "shared")
	data, _ := m.MarshalBinary()
	op, err := s.Submit([]Put{{Queue: a, Msg: m, Data: data}, {Queue: b, Msg: m, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	db := closeCheckedAndOpen(t, s, path)
	var marked int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM copies WHERE body = ?`, singleRun).Scan(&marked); err != nil || marked != 1 {
		t.Fatalf("%d runs marked single (%v), want 1: the single put's", marked, err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE copies SET body = ? WHERE queue = (SELECT id FROM queues WHERE name = 'b')`, singleRun); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, path); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "1 bodies in runs of single copies have other copies") {
		t.Fatalf("a shared body in a run marked single: %v", err)
	}
}

// closeCheckedAndOpen closes s, checks that the store at path is
// consistent, and opens it as a plain database for a test to damage.
func closeCheckedAndOpen(t *testing.T, s *Store, path string) *sql.DB {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), path); err != nil {
		t.Fatalf("a store used normally: %v", err)
	}
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
