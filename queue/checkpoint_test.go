package queue

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// A writer that commits back to back never lets a passive checkpoint catch
// up with it; the log must still start over, so that it stays bounded.
func TestWALStartsOverUnderSteadyWrites(t *testing.T) {
	old := walRestartFrames
	walRestartFrames = 64 // 256 KiB
	t.Cleanup(func() { walRestartFrames = old })
	s, _ := openTemp(t, func(c *Config) { c.Sync = SyncNormal })
	q := mustQueue(t, s, "q", KindReceive)
	body := strings.Repeat("x", 3000)
	// Several submitters keep the writer busy until the log starts over
	// twice (the first may come from a moment the writer was idle), or
	// give up: a restart takes a few checkpoint intervals.
	until := time.Now().Add(100 * checkpointInterval)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 4 {
		wg.Go(func() {
			for s.wal.restarts.Load() < 2 && time.Now().Before(until) {
				puts := make([]Put, 8)
				for i := range puts {
					puts[i] = Put{Queue: q, Msg: msg(4, body)}
				}
				op, err := s.Submit(puts)
				if err == nil {
					err = op.Wait(context.Background())
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	if n := s.wal.restarts.Load(); n < 2 {
		t.Fatalf("the log started over %d times in %v of steady writes, want 2", n, 100*checkpointInterval)
	}
}
