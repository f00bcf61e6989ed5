package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
)

func TestBenchLocalJSON(t *testing.T) {
	r := runPetrel(t, 60*time.Second, "bench", "local",
		"--messages", "5000", "--producers", "8", "--consumers", "2", "--json")
	r.wantCode(t, exitOK)

	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	var got map[string]any
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r.stdout)
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON value:\n%s", r.stdout)
	}
	for _, k := range []string{"scenario", "messages", "size", "sync", "producers", "consumers",
		"enqueue_msgs_per_sec", "msgs_per_sec", "p50_ms", "p99_ms", "peak_rss_mb", "prefill"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
	want := map[string]any{"scenario": "local", "messages": 5000.0, "size": 128.0, "sync": "full",
		"producers": 8.0, "consumers": 2.0, "prefill": 0.0, "acked": 5000.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, k := range []string{"msgs_per_sec", "enqueue_msgs_per_sec", "p50_ms", "p99_ms", "peak_rss_mb"} {
		if v, _ := got[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, got[k])
		}
	}
}

// With --prefill, the consumers drain the backlog as well as the measured
// messages.
func TestBenchLocalPrefill(t *testing.T) {
	r := runPetrel(t, 60*time.Second, "bench", "local", "--messages", "1000", "--prefill", "2000",
		"--producers", "4", "--consumers", "2", "--sync", "normal", "--json")
	r.wantCode(t, exitOK)
	var got bench.LocalResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not a bench result: %v\n%s", err, r.stdout)
	}
	if got.Prefill != 2000 || got.Acked != 3000 || got.Sync != "normal" {
		t.Errorf("prefill %d, acked %d, sync %s; want 2000, 3000, normal", got.Prefill, got.Acked, got.Sync)
	}
}
