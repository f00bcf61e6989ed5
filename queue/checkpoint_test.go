package queue

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/tmpfs"
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

// While the disk is full every checkpoint fails, ten times a second; the
// log gets one line a minute, which counts the lines held back. The
// filesystem is real and fills up; the clock is the store's.
func TestCheckpointFailuresLoggedOnceAMinute(t *testing.T) {
	dir := tmpfs.Mount(t, "2m")
	path := filepath.Join(dir, "petrel.db")
	var logs petreltest.SyncBuffer
	c := newClock()
	s := openAt(t, path, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		cfg.Now = c.Now
	})
	q := mustQueue(t, s, "q", KindReceive)
	// With the checkpointer held, the puts stay in the log, which then
	// holds pages the database file has no room for.
	s.wal.ckptMu.Lock()
	filler := fillDisk(t, path)
	if err := os.Truncate(filler, fileSize(t, filler)-512<<10); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 3000)
	puts := make([]Put, 64)
	for i := range puts {
		puts[i] = Put{Queue: q, Msg: msg(4, body)}
	}
	submitWait(t, s, puts)
	tmpfs.Fill(t, filler)
	s.wal.ckptMu.Unlock()
	lines := func() int { return strings.Count(logs.String(), `msg="checkpoint failed`) }
	petreltest.Eventually(t, "ten checkpoints failed", func() bool { return s.wal.failures.Load() >= 10 })
	if n := lines(); n != 1 {
		t.Fatalf("%d failed checkpoints logged %d lines, want 1:\n%s", s.wal.failures.Load(), n, logs.String())
	}
	c.Advance(time.Minute)
	petreltest.Eventually(t, "a line a minute later", func() bool { return lines() == 2 })
	last := logs.String()[strings.LastIndex(logs.String(), `msg="checkpoint failed`):]
	if !strings.Contains(last, "database or disk is full") || strings.Contains(last, "suppressed=0") {
		t.Fatalf("the second line does not say why, or what it held back: %s", last)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
