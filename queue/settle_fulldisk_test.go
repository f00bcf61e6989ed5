package queue

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/tmpfs"
)

// TestSettleOnFullDiskComesBack settles a delivery while the disk is full,
// on a real filesystem that fills up, in each way a settle reaches the
// writer. Its commit fails; the message must not be stranded (gone from
// memory, still stored and counted, until a restart): the next sweep
// gives it back, as after a lease timeout, and it fails again, logged
// once; once the disk has room it is delivered again, without a restart,
// and can be acked. The counters equal the rows all along and Check
// passes. It needs root to mount (see tmpfs.Mount).
func TestSettleOnFullDiskComesBack(t *testing.T) {
	ack := func(_ *Queue, d *Delivery) error { return d.Ack() }
	deadLetter := func(_ *Queue, d *Delivery) error { return d.DeadLetter("poison") }
	cases := []struct {
		name string
		// dlq makes the dead-letter queue before the disk fills; fromDLQ
		// moves the message there, and consumes it from there.
		dlq, fromDLQ bool
		settle       func(q *Queue, d *Delivery) error
	}{
		// Each copy's ack is gathered with its queue's others.
		{"ack", false, false, ack},
		{"ack all", false, false, func(q *Queue, d *Delivery) error { return q.AckAll([]*Delivery{d}) }},
		// A message moved to a dead-letter queue is a row of its own,
		// acked one request each.
		{"ack of a dead letter", true, true, ack},
		{"dead letter", true, false, deadLetter},
		// Making the dead-letter queue is a commit too.
		{"dead letter, its queue not made yet", false, false, deadLetter},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tmpfs.Mount(t, "2m")
			path := filepath.Join(dir, "petrel.db")
			var logs petreltest.SyncBuffer
			s := openAt(t, path, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			q := mustQueue(t, s, "q", KindReceive)
			if tc.dlq {
				mustQueue(t, s, "q"+DeadLetterSuffix, KindReceive)
			}
			body := strings.Repeat("x", 3000)
			mustPut(t, q, msg(4, body))
			_, d := pollBody(t, q)
			if d == nil {
				t.Fatal("nothing to poll")
			}
			if tc.fromDLQ {
				if err := d.DeadLetter("poison"); err != nil {
					t.Fatal(err)
				}
				syncWriter(t, s)
				q = mustQueue(t, s, "q"+DeadLetterSuffix, KindReceive)
				if _, d = pollBody(t, q); d == nil {
					t.Fatal("nothing to poll in the dead-letter queue")
				}
			}
			filler := fillDisk(t, path)
			// Twice on the full disk: the message that came back is
			// settled again, and fails again.
			for attempt := 1; attempt <= 2; attempt++ {
				// A settle does not wait for its commit, so it cannot say
				// that the commit failed; only making the dead-letter
				// queue, which it waits for, can.
				err := tc.settle(q, d)
				if err != nil && !errors.Is(err, ErrStoreFull) {
					t.Fatalf("settle on a full disk: %v", err)
				}
				syncWriter(t, s)
				if err == nil && !strings.Contains(logs.String(), "database or disk is full") {
					t.Fatalf("the settle did not fail on the full disk; the log:\n%s", logs.String())
				}
				checkStats(t, q, 1, len(d.Data), 1)
				// The lease timed out, as the sweep sees it.
				if err := s.Sweep(context.Background(), false); err != nil {
					t.Fatal(err)
				}
				var got string
				got, d = pollBody(t, q)
				if d == nil || got != body {
					t.Fatalf("after the failed settle and a sweep, polled %q, want the message again", got)
				}
				if d.Attempt != attempt+1 {
					t.Errorf("delivered again as attempt %d, want %d", d.Attempt, attempt+1)
				}
			}
			if strings.Contains(logs.String(), "rollback failed") {
				t.Errorf("a commit that SQLite rolled back by itself was logged as a failed rollback:\n%s", logs.String())
			}
			for _, line := range []string{"store write failed", "group commit failed"} {
				if n := strings.Count(logs.String(), line); n > 1 {
					t.Errorf("%q logged %d times within a minute, want once:\n%s", line, n, logs.String())
				}
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			// Room again: the message that came back is acked for good.
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
			syncWriter(t, s)
			checkStats(t, q, 0, 0, 0)
			q.mu.Lock()
			leases, settling := len(q.inflight), q.settling
			q.mu.Unlock()
			if leases != 0 || settling != 0 {
				t.Fatalf("%d leases (%d settling) kept after the ack committed", leases, settling)
			}
			if b, d := pollBody(t, q); d != nil {
				t.Fatalf("polled %q after the ack committed", b)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := Check(context.Background(), path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// fillDisk fills the filesystem that holds the database at path: it
// empties the database's log into the database first (a log that starts
// over is written over its old pages, which needs no room), then writes a
// file until the filesystem is full, and returns that file's path.
func fillDisk(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("truncate the log: busy %d, %v", busy, err)
	}
	filler := filepath.Join(filepath.Dir(path), "filler")
	tmpfs.Fill(t, filler)
	return filler
}

// syncWriter waits until the writer has handled every request submitted so
// far, committed or failed. It commits nothing, so a full disk lets it.
func syncWriter(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// checkStats checks q's depth, bytes and messages in flight.
func checkStats(t *testing.T, q *Queue, depth, bytes, inFlight int) {
	t.Helper()
	st := q.Stats()
	if st.Depth != int64(depth) || st.Bytes != int64(bytes) || st.InFlight != int64(inFlight) {
		t.Fatalf("depth %d, bytes %d, in flight %d; want %d, %d, %d", st.Depth, st.Bytes, st.InFlight, depth, bytes, inFlight)
	}
}
