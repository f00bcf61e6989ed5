package console

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/queue"
)

// fakeSource is a node of fixed figures whose every queue that holds
// messages has its oldest made at made.
type fakeSource struct {
	snap   Snapshot
	made   time.Time
	calls  atomic.Int64 // of Oldest and DeadLetterQueue
	oldest atomic.Int64 // of Oldest
}

func (f *fakeSource) Snapshot() Snapshot { return f.snap }

func (f *fakeSource) Browse(context.Context, string, string, int) (Page, error) {
	return Page{}, nil
}

func (f *fakeSource) Oldest(_ context.Context, name string) (time.Time, bool) {
	f.calls.Add(1)
	f.oldest.Add(1)
	for _, q := range f.snap.Queues {
		if q.Name == name && q.Depth > 0 {
			return f.made, true
		}
	}
	return time.Time{}, false
}

func (f *fakeSource) DeadLetterQueue(name string) string {
	f.calls.Add(1)
	if queue.IsDeadLetter(name) {
		return name
	}
	return ""
}

// newFakeServer is a console of src; the test closes it.
func newFakeServer(t *testing.T, src Source) *Server {
	t.Helper()
	s, err := New(Options{Source: src, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// manyQueues is n receive queues q0000… of one message each.
func manyQueues(n int) []queue.Stats {
	out := make([]queue.Stats, n)
	for i := range out {
		out[i] = queue.Stats{Name: fmt.Sprintf("q%04d", i), Kind: queue.KindReceive, Depth: 1}
	}
	return out
}

// A queue's page shows the age of its oldest message wherever the queue
// stands among many: the bound on lookups is the Queues page's.
func TestQueuePageShowsOldestPastTheBound(t *testing.T) {
	src := &fakeSource{snap: Snapshot{Queues: manyQueues(3 * queuesPerPage)}, made: time.Now().Add(-90 * time.Second)}
	s := newFakeServer(t, src)
	ctx := context.Background()
	for _, name := range []string{"q0000", fmt.Sprintf("q%04d", queuesPerPage), fmt.Sprintf("q%04d", 3*queuesPerPage-1)} {
		v := s.queueView(ctx, src.snap, name)
		if !v.Found || v.Q.Oldest < 90*time.Second {
			t.Errorf("the page of %s: found %v, oldest %v; want about 90s", name, v.Found, v.Q.Oldest)
		}
	}
}

// The Queues page shows queuesPerPage queues at a time, each with its
// oldest message, and reads the node for those only: what a tab costs
// each tick does not grow with the node's queues.
func TestQueuesPagePages(t *testing.T) {
	const total = 30*queuesPerPage + 50
	src := &fakeSource{snap: Snapshot{Queues: manyQueues(total)}, made: time.Now().Add(-90 * time.Second)}
	s := newFakeServer(t, src)
	ctx := context.Background()
	for _, c := range []struct{ from, first, rows, prev, next int }{
		{0, 0, queuesPerPage, -1, queuesPerPage},
		{5 * queuesPerPage, 5 * queuesPerPage, queuesPerPage, 4 * queuesPerPage, 6 * queuesPerPage},
		{1 << 30, 30 * queuesPerPage, 50, 29 * queuesPerPage, -1},
		{-7, 0, queuesPerPage, -1, queuesPerPage},
	} {
		src.calls.Store(0)
		v := s.queuesView(ctx, src.snap, c.from)
		if len(v.Queues) != c.rows || v.Queues[0].Name != fmt.Sprintf("q%04d", c.first) || v.Total != total || v.Prev != c.prev || v.Next != c.next {
			t.Errorf("from %d: %d rows from %s of %d, prev %d, next %d; want %d from q%04d, prev %d, next %d",
				c.from, len(v.Queues), v.Queues[0].Name, v.Total, v.Prev, v.Next, c.rows, c.first, c.prev, c.next)
		}
		for _, q := range v.Queues {
			if q.Oldest < 90*time.Second {
				t.Errorf("from %d: %s shows oldest %v, want about 90s", c.from, q.Name, q.Oldest)
			}
		}
		if n := src.calls.Load(); n > 2*int64(c.rows) {
			t.Errorf("from %d: %d reads of the node for %d rows", c.from, n, c.rows)
		}
	}
	// The next tick reads the store again only for a queue whose figures
	// changed: the others have the same oldest message.
	s.queuesView(ctx, src.snap, 0)
	src.snap.Queues[7].Enqueued++
	src.oldest.Store(0)
	if v := s.queuesView(ctx, src.snap, 0); src.oldest.Load() != 1 || v.Queues[7].Oldest < 90*time.Second {
		t.Errorf("the same page again, one queue changed: %d oldest-message lookups, want 1", src.oldest.Load())
	}
	src.calls.Store(0)
	if v := s.queueView(ctx, src.snap, "q1234"); !v.Found || src.calls.Load() > 2 {
		t.Errorf("a queue's page: found %v, %d reads of the node, want 2 at most", v.Found, src.calls.Load())
	}
}
