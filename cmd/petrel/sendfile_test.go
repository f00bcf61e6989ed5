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
