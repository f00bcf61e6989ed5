package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestHATakeover runs a live/backup pair as two `petrel node` processes on
// one data directory, the live on 127.0.0.1 and the backup on 127.0.0.2,
// same port, as two machines would. Node a streams messages through the
// pair (relay role) to node b, dialing it with failover:(live,backup).
// Midway the live is killed with SIGKILL: the backup takes the lock, opens
// the same store and identity and listens; a's failover connector carries
// on to it. Every message a was told was durable reaches b exactly once,
// in order per priority, and `petrel stat` on the pair shows the backup's
// role and since when. The pair announces itself by discovery as
// failover:(live,backup), and b hears the backup announce p after the
// takeover. The takeover time is printed; only a generous bound
// is asserted.
func TestHATakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("the takeover test runs without -short")
	}
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Fatalf("127.0.0.2 is not usable on this machine (Linux routes all of 127/8 to lo): %v", err)
	} else {
		ln.Close()
	}
	const messages = 3000
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var procs []*nodeproc.Proc
	t.Cleanup(func() {
		cancel()
		for _, p := range procs {
			p.Kill()
		}
	})
	portP, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	portB, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	portD, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pairDir := filepath.Join(dir, "p")
	fast := func(f nodeproc.NodeFile) nodeproc.NodeFile {
		f.ReconnectMin, f.ReconnectMax = 10*time.Millisecond, 200*time.Millisecond
		return f
	}
	hostP := func(host string) string { return host + ":" + strconv.Itoa(portP) }
	pair := fmt.Sprintf("failover:(tcp://%s,tcp://%s)", hostP("127.0.0.1"), hostP("127.0.0.2"))
	// Both of the pair announce the pair; whichever holds the lock is the
	// one that announces. b hears them.
	disc := fmt.Sprintf("discovery:\n  enabled: true\n  group: \"127.255.255.255:%d\"\n  period: 200ms\n  timeout: 5s\n", portD)
	pairDisc := disc + fmt.Sprintf("  advertise: %q\n", pair)
	files := map[string]nodeproc.NodeFile{
		"b": fast(nodeproc.NodeFile{Name: "b", DataDir: filepath.Join(dir, "b"), Listen: local(portB), Receive: []string{"crash"}, Extra: disc}),
		"live": fast(nodeproc.NodeFile{Name: "p", DataDir: pairDir, Listen: hostP("127.0.0.1"), Relay: []string{"crash"},
			Nodes: [][2]string{{"b", "tcp://" + local(portB)}}, Extra: "ha:\n  role: live\n" + pairDisc}),
		"backup": fast(nodeproc.NodeFile{Name: "p", DataDir: pairDir, Listen: hostP("127.0.0.2"), Relay: []string{"crash"},
			Nodes: [][2]string{{"b", "tcp://" + local(portB)}}, Extra: "ha:\n  role: backup\n" + pairDisc}),
		"a": fast(nodeproc.NodeFile{Name: "a", DataDir: filepath.Join(dir, "a"),
			Nodes:  [][2]string{{"p", pair}},
			Routes: [][2]string{{"b", "p"}}}),
	}
	for name, f := range files {
		if err := f.Write(filepath.Join(dir, name+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string, args ...string) *nodeproc.Proc {
		t.Helper()
		p, err := nodeproc.Start(ctx, name, petrelBin, filepath.Join(dir, name+".stderr"), args...)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
		return p
	}
	ready := func(p *nodeproc.Proc, what string) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if _, _, err := p.WaitLine(wctx, 0, what, func(s string) bool { return strings.HasPrefix(s, what+" ") }); err != nil {
			t.Fatal(err)
		}
	}
	b := start("b", "node", "-c", filepath.Join(dir, "b.yaml"))
	ready(b, "ready")
	live := start("live", "node", "-c", filepath.Join(dir, "live.yaml"))
	ready(live, "ready")
	backup := start("backup", "node", "-c", filepath.Join(dir, "backup.yaml"))
	ready(backup, "waiting")
	// A second live on the held lock is refused, and never opens the store.
	second := runPetrel(t, time.Minute, "node", "-c", filepath.Join(dir, "live.yaml"))
	if second.code == 0 || !strings.Contains(second.stderr, "HA lock is held") || strings.Contains(second.stdout, "ready") {
		t.Fatalf("a second live: exit %d, stdout %s, stderr %s", second.code, second.stdout, second.stderr)
	}
	a := start("a", "bench", "agent", "produce", "-c", filepath.Join(dir, "a.yaml"), "--to", "crash@b",
		"--messages", strconv.Itoa(messages), "--size", strconv.Itoa(crashBodySize), "--rate", "600",
		"--priorities", "mixed", "--keys-log", "--key-prefix", "i0", "--wait-drained")
	ready(a, "ready")

	// Kill the live once a third was stored at a and some has crossed.
	petreltest.Eventually(t, "a third of the messages ok'd at a", func() bool { return countPrefixed(a.Lines(), "ok ") >= messages/3 })
	ackedBefore := acked(ctx, filepath.Join(dir, "a"))
	killed := time.Now()
	live.Kill()
	ready(backup, "ready")
	tookOver := time.Since(killed)
	var served time.Duration
	petreltest.Eventually(t, "a's link acked again, by the backup", func() bool {
		if acked(ctx, filepath.Join(dir, "a")) > ackedBefore {
			served = time.Since(killed)
			return true
		}
		return false
	})
	t.Logf("takeover: backup listening %v after the live's SIGKILL, acking a's messages after %v (a had %d acked before)", tookOver.Round(time.Millisecond), served.Round(time.Millisecond), ackedBefore)
	if served > time.Minute {
		t.Errorf("the backup served after %v", served)
	}

	// The backup announces itself as p: b hears p again after the kill.
	petreltest.Eventually(t, "b hears p announced by the backup", func() bool {
		st, err := readNodeStatus(ctx, "", "", filepath.Join(dir, "b"), "")
		if err != nil {
			return false
		}
		for _, e := range st.Nodes {
			if e.Name == "p" && e.LastSeen.After(killed.Add(tookOver)) && e.Connectors == pair {
				return true
			}
		}
		return false
	})

	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer wcancel()
	var dr bench.DrainedEvent
	if err := a.WaitEvent(wctx, "drained", &dr); err != nil {
		t.Fatalf("a's send queue did not drain through the backup: %v", err)
	}
	if err := waitLinksEmpty(wctx, pairDir); err != nil {
		t.Fatalf("pair: %v", err)
	}
	st := runPetrel(t, time.Minute, "stat", "--data-dir", pairDir)
	st.wantCode(t, 0)
	if !strings.Contains(st.stdout, "ha role backup since ") {
		t.Errorf("petrel stat on the pair after the takeover:\n%s", st.stdout)
	}
	for l := range strings.SplitSeq(st.stdout, "\n") {
		if strings.HasPrefix(l, "ha role") {
			t.Logf("petrel stat: %s", l)
		}
	}
	// A backup that waits for a lock which never comes stops cleanly on
	// SIGTERM, exit 0, without opening anything.
	idle := start("idle-backup", "node", "-c", filepath.Join(dir, "backup.yaml"))
	ready(idle, "waiting")
	if err := idle.Stop(30 * time.Second); err != nil {
		t.Fatalf("a waiting backup stopped: %v", err)
	}
	if err := nodeproc.StopAll(30*time.Second, a, backup, b); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(idle.Lines(), func(l string) bool { return strings.HasPrefix(l, "ready ") }) {
		t.Error("a second backup opened the store while the first held the lock")
	}
	stored := readCrashQueue(t, filepath.Join(dir, "b"))
	tally := tallyCrash(a.Lines(), stored)
	t.Logf("ha summary: messages %d; attempted %d, ok %d, stored at b %d; lost %d, duplicated %d, unexpected %d, out of order %d",
		messages, tally.attempted, tally.ok, tally.stored, tally.lost, tally.duplicated, tally.unexpected, tally.disorder)
	if tally.ok != messages {
		t.Errorf("%d sends returned, want %d", tally.ok, messages)
	}
	if tally.lost+tally.duplicated+tally.unexpected+tally.disorder > 0 {
		t.Errorf("custody broken across the takeover; examples:\n%s", strings.Join(tally.examples, "\n"))
	}
}

// acked is what a's links have had acked so far, -1 if unreadable.
func acked(ctx context.Context, dataDir string) int64 {
	st, err := readNodeStatus(ctx, "", "", dataDir, "")
	if err != nil {
		return -1
	}
	var n int64
	for _, l := range st.Links {
		n += l.Acked
	}
	return n
}
