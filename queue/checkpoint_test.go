package queue

import (
	"context"
	"os"
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
	s, path := openTemp(t, func(c *Config) { c.Sync = SyncNormal })
	q := mustQueue(t, s, "q", KindReceive)
	body := strings.Repeat("x", 3000)
	// Enough checkpoint intervals for several restarts.
	until := time.Now().Add(8 * checkpointInterval)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 4 { // several submitters keep the writer busy
		wg.Go(func() {
			for time.Now().Before(until) {
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
	if s.wal.restarts.Load() == 0 {
		t.Fatal("no RESTART checkpoint completed under steady writes")
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is ever acked, so the log holds everything written unless it
	// started over.
	if fi.Size() >= db.Size() {
		t.Fatalf("WAL is %d bytes beside a %d-byte database: it did not start over", fi.Size(), db.Size())
	}
}
