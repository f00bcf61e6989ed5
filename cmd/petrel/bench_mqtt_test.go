package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"go.uber.org/goleak"
)

// startMosquitto runs a real mosquitto broker for the test, stopped at its
// end.
func startMosquitto(t *testing.T) *bench.Mosquitto {
	t.Helper()
	exe, err := bench.FindMosquitto("")
	if err != nil {
		t.Fatalf("%v (.ci/run installs it)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := bench.StartMosquitto(ctx, exe, t.TempDir())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stop mosquitto: %v", err)
		}
		cancel()
	})
	return m
}

// The bench measures a broker named by --broker (here a real mosquitto)
// and, in the same invocation, a mosquitto of its own: every copy counted
// on both, the ratios beside.
func TestBenchMQTTAgainstMosquitto(t *testing.T) {
	m := startMosquitto(t)
	r := runPetrel(t, 2*time.Minute, "bench", "mqtt", "--broker", m.URL(), "--against-mosquitto",
		"--clients", "2", "--subscribers", "2", "--messages", "300", "--qos", "1", "--size", "64", "--runs", "2", "--json")
	r.wantCode(t, exitOK)
	var got bench.MQTTResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not an MQTT result: %v\n%s", err, r.stdout)
	}
	if got.Broker != m.URL() || got.Mosquitto == nil || len(got.Rounds) != 2 {
		t.Fatalf("result %+v, want the broker %s, mosquitto beside it and 2 rounds", got, m.URL())
	}
	for name, f := range map[string]bench.MQTTFigures{"broker": got.MQTTFigures, "mosquitto": *got.Mosquitto} {
		// Two rounds of 300 messages to 2 subscribers each.
		if f.Delivered != 1200 || f.Lost != 0 || f.PublishMsgsPerSec <= 0 || f.DeliveredMsgsPerSec <= 0 || f.P99ms < f.P50ms {
			t.Errorf("%s figures %+v, want 1200 copies, none lost, rates and latencies", name, f)
		}
	}
	if got.PublishRatio <= 0 || got.DeliveredRatio <= 0 || !strings.HasPrefix(got.MosquittoVersion, "mosquitto version") {
		t.Errorf("ratios %v, %v, version %q: want both ratios and mosquitto's version", got.PublishRatio, got.DeliveredRatio, got.MosquittoVersion)
	}
	for _, k := range []string{"publish_msgs_per_sec", "delivered_msgs_per_sec", "p50_ms", "p99_ms", "publish_ratio", "delivered_ratio"} {
		if !strings.Contains(r.stdout, `"`+k+`"`) {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
}

// Without --broker the bench measures a Petrel node of its own, a petrel
// process with its MQTT listener, beside mosquitto; here at QoS 2, which
// neither broker delivers twice.
func TestBenchMQTTPetrelAgainstMosquitto(t *testing.T) {
	r := runPetrel(t, 2*time.Minute, "bench", "mqtt", "--against-mosquitto",
		"--clients", "2", "--subscribers", "2", "--messages", "300", "--qos", "2", "--json")
	r.wantCode(t, exitOK)
	var got bench.MQTTResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not an MQTT result: %v\n%s", err, r.stdout)
	}
	if got.Broker != "petrel" || got.Mosquitto == nil {
		t.Fatalf("result %+v, want petrel with mosquitto beside it", got)
	}
	for name, f := range map[string]bench.MQTTFigures{"petrel": got.MQTTFigures, "mosquitto": *got.Mosquitto} {
		if f.Delivered != 600 || f.Lost != 0 || f.Duplicates != 0 || f.PublishMsgsPerSec <= 0 || f.DeliveredMsgsPerSec <= 0 {
			t.Errorf("%s figures %+v, want 600 copies, none lost or twice, and rates", name, f)
		}
	}
	if got.PublishRatio <= 0 || got.DeliveredRatio <= 0 {
		t.Errorf("ratios %v, %v: want both", got.PublishRatio, got.DeliveredRatio)
	}
	// Every QoS 2 publish waited for a commit: the node's store committed
	// at least once, and carried at least the 300 publishes.
	if got.StoreCommits <= 0 || got.StoreCommitRequests < 300 || got.Mosquitto.StoreCommits != 0 {
		t.Errorf("store commits %d carrying %d requests (mosquitto %d): want the node's commits, and none for mosquitto",
			got.StoreCommits, got.StoreCommitRequests, got.Mosquitto.StoreCommits)
	}
	if !strings.Contains(r.stderr, "petrel node, MQTT on 127.0.0.1:") {
		t.Errorf("progress does not name the node's MQTT listener:\n%s", r.stderr)
	}
}

// At QoS 0 the human output names the broker and its figures.
func TestBenchMQTTQoS0Figures(t *testing.T) {
	m := startMosquitto(t)
	r := runPetrel(t, time.Minute, "bench", "mqtt", "--broker", m.URL(), "--qos", "0",
		"--clients", "2", "--messages", "200")
	r.wantCode(t, exitOK)
	for _, want := range []string{m.URL() + " publish", m.URL() + " delivered", "p50", "QoS 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// Flag values the bench cannot run with are usage errors, exit 2.
func TestBenchMQTTUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker", "tcp://127.0.0.1:1", "--qos", "3"}, "--qos"},
		{[]string{"--broker", "tcp://127.0.0.1:1", "--size", "8"}, "--size"},
		{[]string{"--broker", "http://127.0.0.1:1"}, "--broker"},
		{[]string{"--broker", "tcp://127.0.0.1:1", "--clients", "0"}, "--clients"},
		{[]string{"--sync", "fast"}, "--sync"},
	} {
		r := runPetrel(t, 10*time.Second, append([]string{"bench", "mqtt"}, c.args...)...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", c.args, c.want, r.stderr)
		}
	}
}

// Run in-process, the bench's MQTT clients and broker processes are all
// gone when it returns.
func TestBenchMQTTLeavesNoGoroutines(t *testing.T) {
	m := startMosquitto(t)
	// The test's own broker runs on until its cleanup.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "mqtt", "--broker", m.URL(), "--against-mosquitto", "--clients", "2", "--messages", "100"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
}
