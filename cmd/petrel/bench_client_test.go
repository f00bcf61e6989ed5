package main

import (
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

func TestBenchClientUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"bench", "client", "--producers", "0"}, `"--producers" flag: want at least 1`},
		{[]string{"bench", "client", "--consumer-window", "0"}, `"--consumer-window" flag`},
		{[]string{"bench", "client", "--sync", "fast"}, `"fast" for "--sync"`},
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
