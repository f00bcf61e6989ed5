package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileCutThroughRelayKilled sends a file a -> c (relay) -> b with the
// three nodes as petrel processes and checks that c forwards it while it
// still receives it: b has part of the file while c holds less than
// seven eighths. Then c is killed with SIGKILL mid-file and restarted.
// The file must still arrive whole (same SHA-256) and once: one file
// message at b, one file in its folder, and nothing left in any spool.
func TestFileCutThroughRelayKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs without -short")
	}
	const size = 64 << 20
	// Small syncs: c forwards only what is durable there, so that is how
	// closely b follows it.
	cl, sum := sendFileAcross(t, size, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	atC, atB := waitCutThrough(ctx, t, cl, size)
	cl.procs["c"].Kill()
	t.Logf("c killed holding %d of %d bytes durably, b having received %d", atC, size, atB)
	checkCustodyAtA(ctx, t, cl)
	cl.startNode("c")

	waitQueueDepth(ctx, t, cl.dataDir("b"), "crash", 1)
	for _, name := range []string{"a", "c"} {
		if err := waitLinksEmpty(ctx, cl.dataDir(name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The restarted c forwarded early again: its link counts it.
	st, err := readNodeStatus(ctx, "", "", cl.dataDir("c"), "")
	if err != nil {
		t.Fatal(err)
	}
	var early int64
	for _, l := range st.Links {
		early += l.Files.Early
	}
	if early < 1 {
		t.Errorf("the restarted c counts %d early forwards, want at least 1", early)
	}
	cl.stopAll()
	checkOneFile(ctx, t, cl.dataDir("b"), sum, func(p string) string { return p })
	for _, name := range []string{"b", "c"} {
		if left := spoolLeftovers(t, filepath.Join(cl.dataDir(name), "spool")); len(left) > 0 {
			t.Errorf("%s's spool still holds %v", name, left)
		}
	}
}

// waitCutThrough waits until b got part of the file while c, which
// relays it, holds between a quarter and seven eighths of it durably, and
// returns what c holds durably and b received then.
func waitCutThrough(ctx context.Context, t *testing.T, cl *crashCluster, size int64) (atC, atB int64) {
	t.Helper()
	held := func(name string, received bool) int64 {
		st, err := readNodeStatus(ctx, "", "", cl.dataDir(name), "")
		if err != nil {
			return -1
		}
		var n int64
		for _, tr := range st.Transfers {
			if received {
				n = max(n, tr.Received)
			} else {
				n = max(n, tr.Offset)
			}
		}
		return n
	}
	for {
		atC = held("c", false)
		if atC >= size*7/8 {
			t.Fatalf("c held %d of %d bytes and b %d: b got nothing while c received the file (no cut-through)", atC, size, atB)
		}
		if atC >= size/4 {
			if atB = held("b", true); atB > 0 {
				return atC, atB
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("c never held a quarter of the file with b holding part of it: c %d, b %d", atC, atB)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkCustodyAtA checks, with the relay c dead mid-file, that a still
// holds the file message (c never acked it: it did not have the whole
// file) and that b has not delivered anything.
func checkCustodyAtA(ctx context.Context, t *testing.T, cl *crashCluster) {
	t.Helper()
	st, err := readNodeStatus(ctx, "", "", cl.dataDir("a"), "")
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, l := range st.Links {
		held += l.Depth + l.InFlight
	}
	if held != 1 {
		t.Errorf("a holds %d messages in its send queues with the relay dead mid-file, want the file message: custody left a early", held)
	}
	st, err = readNodeStatus(ctx, "", "", cl.dataDir("b"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Name == "crash" && q.Depth != 0 {
			t.Errorf("b's queue crash holds %d messages while the relay, dead, never had the whole file", q.Depth)
		}
	}
}

// spoolLeftovers lists the files under dir, the held folder's included:
// once every transfer is over, there should be none.
func spoolLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); !strings.HasPrefix(rel, ".") {
			left = append(left, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return left
}
