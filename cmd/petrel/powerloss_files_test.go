package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestPowerLossFiles sends a file a -> b while the power is cut under b
// (on the power-cut filesystem) mid-file. After each cut b must come back
// with a consistent resume state: the offset it resumes from is durable,
// and its partial file holds the source's bytes up to it. In the end b
// holds the file once, whole, with the source's SHA-256.
func TestPowerLossFiles(t *testing.T) {
	plan, rng := powerLossPlan(t)
	cuts := min(plan.cuts, 3)
	const size = 32 << 20
	files := "files:\n  chunk_size: 64KiB\n  window: 16\n  sync_bytes: 1MiB\n"
	cl := newPLCluster(t, "b", "full", plan, rng, files)
	cl.slowLink(8 << 20) // 32 MiB in about 4 s, whatever the machine
	cl.start("b")
	// a sends the file from its own node: a plain node.
	cl.aPlain = true
	cl.start("a")
	src, sum := sendRandomFile(t, cl.configPath("a"), size)
	source, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range cuts {
		// Cut at a random point of the i-th share of the file.
		at := int64(size) * int64(i*4+1+rng.IntN(3)) / int64(cuts*4+1)
		held := waitReceived(ctx, t, cl.dataDir("b"), at, size)
		cl.cut()
		cl.start("b")
		// b lists the transfer again once a resumes it.
		var st petrel.Status
		var serr error
		petreltest.Eventually(t, "b lists the transfer after the cut", func() bool {
			st, serr = readNodeStatus(ctx, "", "", cl.dataDir("b"), "")
			return serr == nil && len(st.Transfers) == 1
		}, func() string { return fmt.Sprintf("transfers %+v, error %v", st.Transfers, serr) })
		off := st.Transfers[0].Offset
		checkPartPrefix(t, cl.dataDir("b"), source, off)
		// Every checkpoint is durable: b resumes past what it had synced
		// when the status was read before the cut, less one sync_bytes and
		// the window on the wire.
		if off < held-4<<20 {
			t.Errorf("cut %d at %d bytes received: b resumes from %d, more than 4MiB back", cl.cuts, held, off)
		}
		t.Logf("cut %d at %d of %d bytes received: b resumes from %d", cl.cuts, held, size, off)
	}
	waitQueueDepth(ctx, t, cl.dataDir("b"), "crash", 1)
	if err := waitLinksEmpty(ctx, cl.dataDir("a")); err != nil {
		t.Fatal(err)
	}
	cl.release()
	// The node wrote the path through the mount; the file is in the
	// backing directory now.
	checkOneFile(ctx, t, cl.dataDir("b"), sum, func(p string) string {
		return filepath.Join(cl.fs.Backing(), strings.TrimPrefix(p, cl.fs.Dir()))
	})
	t.Logf("power loss files: cuts %d, acked 1 file of %d bytes, recovered 1 (SHA-256 whole), lost 0, duplicated 0", cl.cuts, size)
}

func (cl *plCluster) stopAll() {
	cl.t.Helper()
	if err := nodeproc.StopAll(30*time.Second, cl.procs["a"], cl.procs["b"]); err != nil {
		cl.t.Fatalf("stop: %v", err)
	}
}

// waitReceived waits until b has received at least at bytes of the file,
// and returns what it had; the file must not be complete by then.
func waitReceived(ctx context.Context, t *testing.T, dataDir string, at, size int64) int64 {
	t.Helper()
	for {
		st, err := readNodeStatus(ctx, "", "", dataDir, "")
		if err == nil && len(st.Transfers) == 1 && st.Transfers[0].Received >= at {
			if st.Transfers[0].Received >= size {
				t.Fatalf("b received the whole file before the cut at %d", at)
			}
			return st.Transfers[0].Received
		}
		select {
		case <-ctx.Done():
			t.Fatalf("b never received %d bytes: %v (%v)", at, ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// checkPartPrefix checks that b's partial file holds the source's bytes
// up to the offset it resumes from.
func checkPartPrefix(t *testing.T, dataDir string, source []byte, off int64) {
	t.Helper()
	var parts []string
	filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".part") {
			parts = append(parts, p)
		}
		return nil
	})
	if len(parts) != 1 {
		t.Fatalf("b holds %d partial files, want 1: %v", len(parts), parts)
	}
	f, err := os.Open(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, off)
	if _, err := io.ReadFull(f, got); err != nil {
		t.Fatalf("b resumes from %d, its partial file is shorter: %v", off, err)
	}
	if !bytes.Equal(got, source[:off]) {
		i := 0
		for i < len(got) && got[i] == source[i] {
			i++
		}
		t.Fatalf("b resumes from %d, its partial file differs from the source at byte %d", off, i)
	}
}
