package sender

import (
	"testing"
	"time"

	"github.com/petrelmq/petrel/queue"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFlightAcksCumulativelyAndTakesRefusals(t *testing.T) {
	f := &flight{}
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
