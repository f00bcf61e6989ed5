package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/queue"
)

// fakeSource is a node of fixed figures whose every queue that holds
// messages has its oldest made at made.
type fakeSource struct {
	snap Snapshot
	made time.Time
}

func (f *fakeSource) Snapshot() Snapshot { return f.snap }

func (f *fakeSource) Browse(context.Context, string, int) ([]adminapi.Message, bool, error) {
	return nil, false, nil
}

func (f *fakeSource) Oldest(_ context.Context, name string) (time.Time, bool) {
	for _, q := range f.snap.Queues {
		if q.Name == name && q.Depth > 0 {
			return f.made, true
		}
	}
	return time.Time{}, false
}

func (f *fakeSource) DeadLetterQueue(name string) string {
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
	t.Cleanup(s.Close)
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
	src := &fakeSource{snap: Snapshot{Queues: manyQueues(3 * maxOldest)}, made: time.Now().Add(-90 * time.Second)}
	s := newFakeServer(t, src)
	ctx := context.Background()
	for _, name := range []string{"q0000", fmt.Sprintf("q%04d", maxOldest), fmt.Sprintf("q%04d", 3*maxOldest-1)} {
		v := s.queueView(ctx, src.snap, name)
		if !v.Found || v.Q.Oldest < 90*time.Second {
			t.Errorf("the page of %s: found %v, oldest %v; want about 90s", name, v.Found, v.Q.Oldest)
		}
	}
}

// The Queues page's bound counts lookups, not queues: empty queues
// before one that holds messages do not use it up.
func TestQueuesPageBoundCountsLookups(t *testing.T) {
	qs := manyQueues(2 * maxOldest)
	for i := range qs[:len(qs)-1] {
		qs[i].Depth = 0
	}
	src := &fakeSource{snap: Snapshot{Queues: qs}, made: time.Now().Add(-90 * time.Second)}
	s := newFakeServer(t, src)
	views := s.queueViews(context.Background(), src.snap)
	if last := views[len(views)-1]; last.Oldest < 90*time.Second {
		t.Errorf("%s, the one queue that holds a message, after %d empty ones: oldest %v, want about 90s", last.Name, len(qs)-1, last.Oldest)
	}
}
