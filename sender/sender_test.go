package sender

import (
	"context"
	"testing"
	"time"

	"github.com/petrelmq/petrel/queue"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFlightAcksCumulativelyAndTakesRefusals(t *testing.T) {
	f := newFlight(&status{})
	ds := make([]*queue.Delivery, 6)
	for i := range ds {
		ds[i] = &queue.Delivery{RowID: int64(i + 1)}
		f.push(uint64(i+1), ds[i])
	}
	if d := f.take(3); d != ds[2] {
		t.Fatalf("take(3) = %v", d)
	}
	if d := f.take(3); d != nil {
		t.Fatal("a refused seq was taken twice")
	}
	got := f.upTo(4)
	if len(got) != 4 || got[0] != ds[0] || got[2] != nil || got[3] != ds[3] {
		t.Fatalf("upTo(4) = %v", got)
	}
	if got := f.upTo(2); got != nil {
		t.Fatalf("stale ack returned %v", got)
	}
	if got := f.upTo(^uint64(0)); len(got) != 2 || got[0] != ds[4] {
		t.Fatalf("upTo(max) = %v", got)
	}
	if got := f.upTo(^uint64(0)); len(got) != 0 {
		t.Fatalf("empty flight returned %v", got)
	}
}

func TestBackoffGrowsWithJitterWithinCaps(t *testing.T) {
	s := &Sender{cfg: Config{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second}.withDefaults()}
	for attempt := 1; attempt <= 10; attempt++ {
		want := min(100*time.Millisecond<<(attempt-1), time.Second)
		seen := map[time.Duration]bool{}
		for i := 0; i < 50; i++ {
			d := s.backoff(attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("attempt %d: no jitter", attempt)
		}
	}
}

// TestFlightBoundsItsBytes checks the byte bound of a session's window:
// under it the next message goes whatever its size; at it the sender
// waits until acks take bytes out; a message larger than the bound goes
// alone.
func TestFlightBoundsItsBytes(t *testing.T) {
	st := &status{}
	f := newFlight(st)
	const limit = 1000
	ctx := context.Background()
	push := func(seq uint64, n int) {
		if !f.waitRoom(ctx, limit, time.Now) {
			t.Fatal("waitRoom refused")
		}
		f.push(seq, &queue.Delivery{RowID: int64(seq), Data: make([]byte, n)})
	}
	push(1, 600)
	push(2, 600) // 600 < 1000: goes, and the flight holds 1200
	if got := st.inFlightBytes.Load(); got != 1200 {
		t.Fatalf("in-flight bytes %d, want 1200", got)
	}
	waited := make(chan bool, 1)
	go func() { waited <- f.waitRoom(ctx, limit, time.Now) }()
	select {
	case <-waited:
		t.Fatal("a third message went with 1200 bytes of 1000 in flight")
	case <-time.After(50 * time.Millisecond):
	}
	f.upTo(1) // 600 left
	select {
	case ok := <-waited:
		if !ok {
			t.Fatal("waitRoom refused")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an ack that brought the flight under its bound did not let the next message go")
	}
	st.mu.Lock()
	full := st.fullSince
	st.mu.Unlock()
	if full.IsZero() {
		t.Fatal("the full window was not reported")
	}
	f.take(2)     // refused: its bytes leave too
	push(3, 5000) // larger than the bound, alone
	if got := st.inFlightBytes.Load(); got != 5000 {
		t.Fatalf("in-flight bytes %d, want 5000", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if f.waitRoom(cctx, limit, time.Now) {
		t.Fatal("waitRoom went on past a full flight with its context ended")
	}
	f.upTo(^uint64(0))
	if got := st.inFlightBytes.Load(); got != 0 {
		t.Fatalf("in-flight bytes %d after every ack, want 0", got)
	}
}
