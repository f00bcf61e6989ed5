//go:build linux

package petrel_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/internal/tmpfs"
)

// TestAckOnFullDiskDeliveredAgain acks, through a node's Consumer, three
// messages whose acks cannot commit: the node's data directory is a real
// filesystem that is full. The messages must come back by themselves, as
// after a lease timeout, and once the disk has room be delivered again,
// without a restart, and acked; the node's cleanup then checks that
// nothing is in flight and that the counters equal the rows. Before, the
// acks took the messages out of memory while their rows stayed: "no
// message" until a restart, with the rows counted in the queue's depth
// and bytes.
func TestAckOnFullDiskDeliveredAgain(t *testing.T) {
	dir := tmpfs.Mount(t, "8m")
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.DataDir = dir
		c.Store.SweepInterval = 20 * time.Millisecond
	}))
	ctx := context.Background()
	p := n.Producer()
	for range 3 {
		m := p.CreateDataMessage("orders")
		m.Body = []byte("order")
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := n.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	filler := fillNodeDisk(t, filepath.Join(dir, "petrel.db"))
	// All three are taken before any is acked: a message whose ack failed
	// comes back at once, and on a loaded machine would be taken again in
	// this loop, in place of one not yet delivered.
	var held []*petrel.Delivery
	for range 3 {
		held = append(held, receive(t, c))
	}
	for _, d := range held {
		// Ack does not wait for its commit: it cannot say it failed.
		if err := c.Ack(d); err != nil {
			t.Fatalf("ack on a full disk: %v", err)
		}
	}
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := n.QueueStat("orders"); st.Depth != 3 || st.Acked != 0 {
		t.Fatalf("after acks that could not commit: depth %d, acked %d; want 3, 0", st.Depth, st.Acked)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d := receive(t, c)
		if d.Attempt != 2 {
			t.Errorf("delivered again as attempt %d, want 2", d.Attempt)
		}
		if err := c.Ack(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the acks committed", func() bool {
		st, _ := n.QueueStat("orders")
		return st.Depth == 0 && st.Bytes == 0 && st.InFlight == 0 && st.Acked == 3
	})
}

// fillNodeDisk fills the filesystem that holds the node's store at path,
// and returns the file that fills it. It empties the store's log into the
// database first: a log that starts over is written over its old pages,
// which needs no room, and the acks would commit. The sqlite3 driver is
// the store's, registered by the node; this test does not import it.
func fillNodeDisk(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("truncate the store's log: busy %d, %v", busy, err)
	}
	filler := filepath.Join(filepath.Dir(path), "filler")
	tmpfs.Fill(t, filler)
	return filler
}
