package nodes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/queue"
)

// leaseGrace bounds the wait for leases to come back at the end of a test:
// a client or link that just closed gives its leases back asynchronously,
// in milliseconds. It is far below the default lease timeout (30s), so a
// lease that was truly left behind is reported, not expired.
const leaseGrace = 5 * time.Second

// checkLeases reports the queues that still have messages in flight once
// every client and consumer of the test closed. A node the test closed
// itself is skipped: its leases are gone with it.
func checkLeases(t testing.TB, n *petrel.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaseGrace)
	defer cancel()
	if err := n.Sync(ctx); errors.Is(err, petrel.ErrClosed) || errors.Is(err, queue.ErrClosed) {
		return
	}
	var leased []string
	if petreltest.Holds(leaseGrace, func() bool {
		leased = leased[:0]
		for _, st := range n.QueueStats() {
			if st.InFlight != 0 {
				leased = append(leased, fmt.Sprintf("%s: %d in flight", st.Name, st.InFlight))
			}
		}
		return len(leased) == 0
	}) {
		return
	}
	t.Errorf("node %s: leases left when the test ended (settle them, or open with nodes.LeasesMayRemain): %s",
		n.Name(), strings.Join(leased, "; "))
}

// checkStore runs queue.Check on the closed node's store.
func checkStore(t testing.TB, cfg petrel.Config) {
	t.Helper()
	path := cfg.Store.Path
	if path == "" {
		path = filepath.Join(cfg.DataDir, "petrel.db")
	}
	if err := queue.Check(context.Background(), path); err != nil {
		t.Errorf("node %s: %v", cfg.Name, err)
	}
}

// checkPartials reports partial (.part) and temporary (.tmp) files left
// in the node's data directory and received folder, outside the spool,
// where resumable transfers legitimately keep theirs.
func checkPartials(t testing.TB, cfg petrel.Config) {
	t.Helper()
	spool := cfg.Files.Spool
	if spool == "" {
		spool = filepath.Join(cfg.DataDir, "spool")
	}
	roots := []string{cfg.DataDir}
	if r := cfg.Files.Received; r != "" && !within(r, cfg.DataDir) {
		roots = append(roots, r)
	}
	var left []string
	for _, root := range roots {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return nil // gone meanwhile, or unreadable: not a partial file
			case d.IsDir() && filepath.Clean(path) == filepath.Clean(spool):
				return filepath.SkipDir
			case !d.IsDir() && (strings.HasSuffix(d.Name(), ".part") || strings.HasSuffix(d.Name(), ".tmp")):
				left = append(left, path)
			}
			return nil
		})
	}
	if len(left) > 0 {
		t.Errorf("node %s: partial files outside the spool: %s", cfg.Name, strings.Join(left, ", "))
	}
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
