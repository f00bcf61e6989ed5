package queue

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/tmpfs"
)

// TestFullDiskThenRecover fills a real filesystem (a 2 MiB tmpfs) until
// puts fail, checks that the failure is ErrStoreFull and that nothing
// stored before is damaged, then gives the filesystem more room and checks
// that puts succeed again by themselves. It needs root to mount, and skips
// elsewhere.
func TestFullDiskThenRecover(t *testing.T) {
	dir := tmpfs.Mount(t, "2m")
	s := openAt(t, filepath.Join(dir, "petrel.db"), nil)
	q := mustQueue(t, s, "q", KindReceive)
	body := strings.Repeat("x", 4000)
	stored := 0
	var full error
	for i := 0; i < 10000; i++ {
		if err := q.Put(context.Background(), msg(4, body), false); err != nil {
			full = err
			break
		}
		stored++
	}
	if !errors.Is(full, ErrStoreFull) {
		t.Fatalf("after %d puts: %v, want ErrStoreFull", stored, full)
	}
	t.Logf("the disk filled after %d puts: %v", stored, full)
	tmpfs.Grow(t, dir, "64m")
	if err := q.Put(context.Background(), msg(4, "after"), false); err != nil {
		t.Fatalf("put once space returned: %v", err)
	}
	got := drain(t, q)
	if len(got) != stored+1 || got[len(got)-1] != "after" {
		t.Fatalf("read back %d messages, want the %d stored and the one after", len(got), stored)
	}
}
