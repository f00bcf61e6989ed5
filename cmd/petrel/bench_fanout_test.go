package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
)

func TestBenchFanoutJSON(t *testing.T) {
	r := runPetrel(t, 60*time.Second, "bench", "fanout", "--subscribers", "2", "--durable",
		"--messages", "500", "--producers", "4", "--sync", "normal", "--batch", "7", "--json")
	r.wantCode(t, exitOK)
	var got bench.FanoutResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a fan-out result: %v\n%s", err, r.stdout)
	}
	if got.Delivered != 1000 || !got.Durable || got.Nodes != 1 || got.BaselineAnycastMsgsPerSec <= 0 || got.Batch != 7 {
		t.Errorf("result %+v, want 1000 durable copies, a baseline and batches of 7", got)
	}
	for _, k := range []string{"publish_msgs_per_sec", "delivered_msgs_per_sec", "p50_ms", "p99_ms",
		"peak_rss_mb", "baseline_anycast_msgs_per_sec"} {
		if !strings.Contains(r.stdout, `"`+k+`"`) {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
}

// TestBenchFanoutThreeNodes runs a tiny --nodes 3: every copy delivered,
// spread over the three processes, each with its figures, and none of
// them left running.
func TestBenchFanoutThreeNodes(t *testing.T) {
	r := runPetrel(t, 2*time.Minute, "bench", "fanout", "--nodes", "3", "--subscribers", "4", "--durable",
		"--messages", "300", "--producers", "2", "--sync", "normal", "--json")
	r.wantCode(t, exitOK)
	var got bench.FanoutResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a fan-out result: %v\n%s", err, r.stdout)
	}
	if got.Nodes != 3 || got.Delivered != 1200 || got.BaselineAnycastMsgsPerSec <= 0 || got.PublishMsgsPerSec <= 0 ||
		got.DeliveredMsgsPerSec <= 0 || len(got.PerNode) != 3 {
		t.Fatalf("result %+v, want 1200 copies over 3 nodes, rates and a baseline", got)
	}
	pids := map[string]int{}
	want := map[string]int{"n1": 2, "n2": 1, "n3": 1} // subscription i on node i mod 3
	for _, n := range got.PerNode {
		pids[n.Node] = n.Pid
		if n.Subscribers != want[n.Node] || n.Delivered != int64(300*want[n.Node]) || n.PeakRSSMB <= 0 {
			t.Errorf("node %s: %+v, want %d subscriptions with 300 copies each and its peak RSS", n.Node, n, want[n.Node])
		}
	}
	wantGone(t, pids, 3)
	for _, k := range []string{"publish_msgs_per_sec", "delivered_msgs_per_sec", "p50_ms", "p99_ms",
		"peak_rss_mb", "baseline_anycast_msgs_per_sec", "per_node"} {
		if !strings.Contains(r.stdout, `"`+k+`"`) {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
}

func TestBenchFanoutUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"bench", "fanout", "--nodes", "2"}, `invalid argument 2 for "--nodes" flag: want 1 or 3`},
		{[]string{"bench", "fanout", "--batch", "0"}, `invalid argument 0 for "--batch" flag: want at least 1`},
		{[]string{"bench", "fanout", "--nodes", "3", "--runs", "2"}, `--runs 2: rounds are measured on one node`},
		{[]string{"bench", "agent", "fanout", "--subscribers", "-1"}, `"--subscribers" flag: want at least 0`},
		{[]string{"bench", "agent", "fanout", "--producers", "0"}, `"--producers" flag: want at least 1`},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, tc.args...)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
		})
	}
}
