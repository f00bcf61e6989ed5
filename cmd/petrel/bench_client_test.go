package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBenchClientJSON(t *testing.T) {
	for _, mode := range []string{"after", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"bench", "client", "--messages", "3000", "--producers", "2", "--consumers", "2", "--window", "200", "--json"}
			if mode == "concurrent" {
				args = append(args, "--concurrent")
			}
			r := runPetrel(t, 2*time.Minute, args...)
			r.wantCode(t, exitOK)
			got := decodeOneObject(t, r.stdout)
			wantKeys(t, got, "scenario", "messages", "size", "sync", "producers", "consumers", "window",
				"publish_msgs_per_sec", "consume_msgs_per_sec", "p50_ms", "p99_ms", "node_peak_rss_mb", "client_peak_rss_mb", "node_pid")
			want := map[string]any{"scenario": "client", "messages": 3000.0, "size": 128.0, "sync": "full",
				"producers": 2.0, "consumers": 2.0, "window": 200.0, "concurrent": mode == "concurrent"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
			for _, k := range []string{"publish_msgs_per_sec", "consume_msgs_per_sec", "p50_ms", "p99_ms", "node_peak_rss_mb", "baseline_local_msgs_per_sec", "fsync_p50_us", "ratio_to_local"} {
				if v, _ := got[k].(float64); v <= 0 {
					t.Errorf("%s = %v, want > 0", k, got[k])
				}
			}
			pid, _ := got["node_pid"].(float64)
			wantGone(t, map[string]int{"node": int(pid)}, 1)
		})
	}
}

// --runs measures rounds, each with its own baseline and node, and prints
// the medians of the rounds' figures beside them.
func TestBenchClientRuns(t *testing.T) {
	r := runPetrel(t, 3*time.Minute, "bench", "client", "--runs", "3", "--messages", "2000", "--baseline-messages", "2000", "--json")
	r.wantCode(t, exitOK)
	got := decodeOneObject(t, r.stdout)
	wantMedians(t, got, 3, "publish_msgs_per_sec", "consume_msgs_per_sec", "p99_ms", "baseline_local_msgs_per_sec", "ratio_to_local")
	pid, _ := got["node_pid"].(float64)
	wantGone(t, map[string]int{"node": int(pid)}, 1)
}

// wantMedians checks that got holds runs rounds, each with the keys, and
// that each key's value is the median of the rounds' (runs odd).
func wantMedians(t *testing.T, got map[string]any, runs int, keys ...string) {
	t.Helper()
	rounds, _ := got["rounds"].([]any)
	if got["runs"] != float64(runs) || len(rounds) != runs {
		t.Fatalf("runs %v, rounds %v; want %d of them", got["runs"], got["rounds"], runs)
	}
	for _, k := range keys {
		var v []float64
		for i, rd := range rounds {
			f, _ := rd.(map[string]any)[k].(float64)
			if f <= 0 {
				t.Errorf("round %d: %s = %v, want > 0", i+1, k, rd.(map[string]any)[k])
			}
			v = append(v, f)
		}
		slices.Sort(v)
		if got[k] != v[runs/2] {
			t.Errorf("%s = %v, want the median of the rounds' %v", k, got[k], v)
		}
	}
}

func TestBenchClientUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"bench", "client", "--producers", "0"}, `"--producers" flag: want at least 1`},
		{[]string{"bench", "client", "--consumer-window", "0"}, `"--consumer-window" flag`},
		{[]string{"bench", "client", "--sync", "fast"}, `"fast" for "--sync"`},
		{[]string{"bench", "client", "--runs", "-2"}, `"--runs" flag: want at least 0`},
	} {
		t.Run(strings.Join(tc.args[2:], " "), func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, tc.args...)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
		})
	}
}
