package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestSendfileEndsWhenTheNodeNoLongerKnowsTheFile: petrel sendfile follows
// a file that waits in its send queue (its next hop never answers) for as
// long as it waits there; once the node knows nothing of it (purged here,
// as a file that ended before a restart is unknown after it), sendfile
// exits 1 and says so, where it used to poll for ever.
func TestSendfileEndsWhenTheNodeNoLongerKnowsTheFile(t *testing.T) {
	roots := t.TempDir()
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.FileRoots = []string{roots}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}
	}))
	path := filepath.Join(roots, "report.csv")
	if err := os.WriteFile(path, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Once the file is stored, and sendfile has followed it for a while,
	// the file leaves its queue.
	var purged atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if st, ok := n.QueueStat("files@b"); ok && st.Depth == 1 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if k, err := n.Purge(ctx, "files@b"); err == nil && k == 1 {
			purged.Store(true)
		}
	}()
	r := runPetrel(t, time.Minute, "sendfile", path, "files@b", "--server", n.AdminAddr())
	if !purged.Load() {
		t.Fatalf("sendfile ended before the file left its queue\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	r.wantCode(t, exitFailure)
	for _, want := range []string{"no longer knows file message", "before the node restarted", "no file message"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

// A transfer that fails for good (the next hop refuses the address) ends
// sendfile with exit status 1, with --json as without it; --json still
// prints the object, which says "failed" and why.
func TestSendfileFailedExitsOneWithAndWithoutJSON(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.NoAutoCreate = true
	}))
	roots := t.TempDir()
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.FileRoots = []string{roots}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	path := filepath.Join(roots, "f.bin")
	if err := os.WriteFile(path, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, json := range []bool{false, true} {
		args := []string{"sendfile", path, "nowhere@b", "--server", n.AdminAddr()}
		if json {
			args = append(args, "--json")
		}
		r := runPetrel(t, time.Minute, args...)
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, "failed") {
			t.Fatalf("--json %v: stderr does not say it failed:\n%s", json, r.stderr)
		}
		if json && !strings.Contains(r.stdout, `"state":"failed"`) {
			t.Fatalf("--json: stdout:\n%s", r.stdout)
		}
	}
}
