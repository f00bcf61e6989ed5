package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"go.uber.org/goleak"
)

// needNATS skips a test when no nats-server is installed: --against-nats
// is an optional comparison, and CI does not install NATS.
func needNATS(t *testing.T) {
	t.Helper()
	if _, err := bench.FindNATS(""); err != nil {
		t.Skipf("skipped: %v (apt-get install nats-server to run it)", err)
	}
}

// wantNATS checks the NATS figures of a bench's JSON: every rate and
// latency measured, the ratios beside Petrel's, and the server gone.
func wantNATS(t *testing.T, got map[string]any, ratios ...string) {
	t.Helper()
	n, ok := got["nats"].(map[string]any)
	if !ok {
		t.Fatalf("no nats object in %v", got)
	}
	for _, k := range []string{"publish_msgs_per_sec", "consume_msgs_per_sec", "publish_seconds", "consume_seconds", "p50_ms", "p99_ms", "server_peak_rss_mb", "pid"} {
		if v, _ := n[k].(float64); v <= 0 {
			t.Errorf("nats.%s = %v, want > 0", k, n[k])
		}
	}
	for _, k := range ratios {
		if v, _ := got[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, got[k])
		}
	}
	if v, _ := got["nats_version"].(string); !strings.HasPrefix(v, "nats-server: v") {
		t.Errorf("nats_version = %q, want nats-server's version line", v)
	}
	pid, _ := n["pid"].(float64)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", int(pid)))
	if err == nil && bytes.Contains(cmdline, []byte("nats-server")) {
		t.Errorf("nats-server (pid %d) still runs after the bench returned", int(pid))
	}
}

// bench client --against-nats measures JetStream with the same workload
// after the node, and prints both with the ratios.
func TestBenchClientAgainstNATS(t *testing.T) {
	needNATS(t)
	for _, mode := range []string{"after", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"bench", "client", "--against-nats", "--messages", "3000", "--producers", "2", "--consumers", "2",
				"--window", "200", "--consumer-window", "100", "--baseline-messages", "0", "--json"}
			if mode == "concurrent" {
				args = append(args, "--concurrent")
			}
			r := runPetrel(t, 2*time.Minute, args...)
			r.wantCode(t, exitOK)
			got := decodeOneObject(t, r.stdout)
			wantNATS(t, got, "publish_ratio_to_nats", "consume_ratio_to_nats")
			if !strings.Contains(r.stderr, "nats: publish") {
				t.Errorf("progress does not show the NATS run:\n%s", r.stderr)
			}
		})
	}
}

// With --runs, NATS is measured in every round too, and its figures and
// the ratios are the medians of the rounds'.
func TestBenchClientAgainstNATSRuns(t *testing.T) {
	needNATS(t)
	r := runPetrel(t, 3*time.Minute, "bench", "client", "--against-nats", "--runs", "3", "--messages", "2000", "--baseline-messages", "0", "--json")
	r.wantCode(t, exitOK)
	got := decodeOneObject(t, r.stdout)
	wantNATS(t, got, "publish_ratio_to_nats", "consume_ratio_to_nats")
	wantMedians(t, got, 3, "publish_msgs_per_sec", "publish_ratio_to_nats", "consume_ratio_to_nats")
	n, _ := got["nats"].(map[string]any)
	var natsPub []float64
	for _, rd := range got["rounds"].([]any) {
		natsPub = append(natsPub, rd.(map[string]any)["nats_publish_msgs_per_sec"].(float64))
	}
	slices.Sort(natsPub)
	if n["publish_msgs_per_sec"] != natsPub[1] {
		t.Errorf("nats publish_msgs_per_sec = %v, want the median of the rounds' %v", n["publish_msgs_per_sec"], natsPub)
	}
}

// The human output prints NATS's figures and says that JetStream does not
// fsync per message.
func TestBenchClientAgainstNATSFigures(t *testing.T) {
	needNATS(t)
	r := runPetrel(t, 2*time.Minute, "bench", "client", "--against-nats", "--messages", "1000", "--baseline-messages", "0")
	r.wantCode(t, exitOK)
	for _, want := range []string{"nats publish ", "nats consume ", "publish ratio to nats", "consume ratio to nats", "no fsync per message"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// bench local --against-nats runs the same workload on JetStream, its
// consumers beside its producers as bench local's are.
func TestBenchLocalAgainstNATS(t *testing.T) {
	needNATS(t)
	r := runPetrel(t, 2*time.Minute, "bench", "local", "--against-nats", "--messages", "3000", "--producers", "4",
		"--consumers", "2", "--window", "100", "--json")
	r.wantCode(t, exitOK)
	got := decodeOneObject(t, r.stdout)
	wantNATS(t, got, "enqueue_ratio_to_nats", "end_to_end_ratio_to_nats")
}

// A nats-server that is not there fails the bench before anything runs,
// naming it. This needs no NATS, and runs everywhere.
func TestBenchAgainstNATSMissingBinary(t *testing.T) {
	missing := t.TempDir() + "/no-nats-server"
	for _, cmd := range []string{"client", "local"} {
		r := runPetrel(t, 30*time.Second, "bench", cmd, "--against-nats", "--nats", missing, "--messages", "10")
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, missing) {
			t.Errorf("bench %s: stderr does not name %s:\n%s", cmd, missing, r.stderr)
		}
		if strings.Contains(r.stderr, "baseline:") || strings.Contains(r.stderr, "ready") {
			t.Errorf("bench %s started its run before finding nats-server:\n%s", cmd, r.stderr)
		}
	}
}

// Run in-process, bench local --against-nats leaves no goroutine of its
// NATS connections and consumers (the client bench's NATS side is checked
// in internal/bench, since in-process it could not start its node).
func TestBenchLocalAgainstNATSLeavesNoGoroutines(t *testing.T) {
	needNATS(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "local", "--against-nats", "--messages", "500", "--producers", "2"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
}
