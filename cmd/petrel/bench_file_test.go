package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBenchFileJSON(t *testing.T) {
	r := runPetrel(t, 2*time.Minute, "bench", "file", "--size-mib", "8", "--hops", "2", "--json", "--dir", t.TempDir())
	r.wantCode(t, exitOK)
	got := decodeOneObject(t, r.stdout)
	wantKeys(t, got, "scenario", "hops", "size_mib", "mib_per_sec", "seconds", "send_seconds", "handed_seconds",
		"baseline_mib_per_sec", "baseline_seconds", "ratio", "runs", "sha256", "peak_rss_mb", "rss_mb", "pids")
	want := map[string]any{"scenario": "file", "hops": 2.0, "size_mib": 8.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, k := range []string{"mib_per_sec", "seconds", "send_seconds", "handed_seconds", "baseline_mib_per_sec", "ratio", "peak_rss_mb"} {
		if v, _ := got[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, got[k])
		}
	}
	// Send returns before the file moves.
	if s, h, e := got["send_seconds"].(float64), got["handed_seconds"].(float64), got["seconds"].(float64); s > h || s > e {
		t.Errorf("send_seconds %v, handed_seconds %v, seconds %v: want the send first", s, h, e)
	}
	if runs, _ := got["runs"].([]any); len(runs) != 1 {
		t.Errorf("runs = %v, want one round", got["runs"])
	}
	if sum, _ := got["sha256"].(string); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
		t.Errorf("sha256 = %q", got["sha256"])
	}
	rss, _ := got["rss_mb"].(map[string]any)
	for _, n := range []string{"a", "b", "c"} {
		if v, _ := rss[n].(float64); v <= 0 {
			t.Errorf("rss_mb[%s] = %v, want > 0", n, rss[n])
		}
	}
	wantGone(t, jsonPids(t, got), 3)
}

func TestBenchFileHuman(t *testing.T) {
	r := runPetrel(t, 2*time.Minute, "bench", "file", "--size-mib", "2", "--runs", "2", "--hops", "2",
		"--chunk-kib", "64", "--window", "8", "--sync-kib", "256", "--dir", t.TempDir())
	r.wantCode(t, exitOK)
	for _, want := range []string{"file: 2 hops, a -> c -> b, 2 MiB, chunk 64 KiB, window 8, sync 256 KiB", "median of 2 rounds",
		"round 1", "round 2", "baseline", "ratio", "peak RSS a", "peak RSS b", "peak RSS c"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestBenchFileUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"bench", "file", "--hops", "3"}, `invalid argument 3 for "--hops" flag: want 1 or 2`},
		{[]string{"bench", "file", "--size-mib", "0"}, `invalid argument 0 for "--size-mib" flag: want at least 1`},
		{[]string{"bench", "file", "--window", "-1"}, `"--window" flag`},
		{[]string{"bench", "file", "--runs", "0"}, `"--runs" flag`},
		{[]string{"bench", "file", "--dir", "/nonexistent/petrel"}, `"--dir" flag: not a folder`},
		{[]string{"bench", "agent", "sendfile", "-c", "x.yaml"}, "sendfile needs --to"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, tc.args...)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			if !strings.Contains(r.stderr, "Usage:") {
				t.Errorf("stderr lacks the usage:\n%s", r.stderr)
			}
		})
	}
}
