package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// TestDiscoveryAcrossProcesses: B is a `petrel node` that announces itself
// by broadcast on loopback; A is a producer agent with no configuration for
// B, which finds B and delivers to it. `petrel nodes` on A shows B as
// discovered; once B stops, A forgets it within the timeout.
func TestDiscoveryAcrossProcesses(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	group := fmt.Sprintf("127.255.255.255:%d", pc.LocalAddr().(*net.UDPAddr).Port)
	pc.Close()
	dir := t.TempDir()
	disc := fmt.Sprintf("discovery: {enabled: true, group: %q, period: 100ms, timeout: 1s}\n", group)
	writeFile(t, filepath.Join(dir, "b.yaml"), "node: {name: b, data_dir: b}\nlisten: 127.0.0.1:0\n"+disc)
	writeFile(t, filepath.Join(dir, "a.yaml"), "node: {name: a, data_dir: a}\n"+disc)

	b := startNode(t, dir, "-c", filepath.Join(dir, "b.yaml"))
	b.ready(t)

	produce := exec.Command(petrelBin, "bench", "agent", "produce", "-c", filepath.Join(dir, "a.yaml"),
		"--to", "orders@b", "--messages", "50", "--wait-route", "10s", "--wait-drained")
	produce.Dir, produce.Env = dir, petrelEnv
	stdin, err := produce.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := produce.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	produce.Stderr = &stderr
	if err := produce.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { produce.Process.Kill(); produce.Wait() })
	drained := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		var all strings.Builder
		for {
			n, err := out.Read(buf)
			all.Write(buf[:n])
			if strings.Contains(all.String(), `"event":"drained"`) {
				close(drained)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
		t.Fatalf("producer never drained its queue to the discovered node\n%s", stderr.String())
	}
	r := runPetrel(t, 10*time.Second, "stat", "--data-dir", filepath.Join(dir, "b"), "--json")
	r.wantCode(t, 0)
	var st petrel.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Name == "orders" && q.Depth != 50 {
			t.Fatalf("b holds %d messages, want 50", q.Depth)
		}
	}
	r = runPetrel(t, 10*time.Second, "nodes", "--data-dir", filepath.Join(dir, "a"))
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "discovered") || !strings.Contains(r.stdout, "b ") {
		t.Fatalf("petrel nodes on a:\n%s", r.stdout)
	}

	b.stop(t)
	var nodes []petrel.DirectoryEntry
	petreltest.Eventually(t, "b forgotten after it stopped", func() bool {
		r = runPetrel(t, 10*time.Second, "nodes", "--data-dir", filepath.Join(dir, "a"), "--json")
		r.wantCode(t, 0)
		nodes = nil
		if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil {
			t.Fatal(err)
		}
		return len(nodes) == 0
	}, func() string { return fmt.Sprintf("directory %+v", nodes) })
	stdin.Close()
}
