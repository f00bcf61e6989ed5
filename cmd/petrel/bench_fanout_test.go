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
		"--messages", "500", "--producers", "4", "--sync", "normal", "--json")
	r.wantCode(t, exitOK)
	var got bench.FanoutResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a fan-out result: %v\n%s", err, r.stdout)
	}
	if got.Delivered != 1000 || !got.Durable || got.Nodes != 1 || got.BaselineAnycastMsgsPerSec <= 0 {
		t.Errorf("result %+v, want 1000 durable copies and a baseline", got)
	}
	for _, k := range []string{"publish_msgs_per_sec", "delivered_msgs_per_sec", "p50_ms", "p99_ms",
		"peak_rss_mb", "baseline_anycast_msgs_per_sec"} {
		if !strings.Contains(r.stdout, `"`+k+`"`) {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
}

// --nodes 3 waits for interest forwarding: a usage error, exit 2.
func TestBenchFanoutThreeNodesNotBuilt(t *testing.T) {
	r := runPetrel(t, 10*time.Second, "bench", "fanout", "--nodes", "3")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "not built yet") {
		t.Errorf("stderr lacks \"not built yet\":\n%s", r.stderr)
	}
}
