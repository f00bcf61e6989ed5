package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRunFanout runs the fan-out bench with tiny counts and checks that
// every copy was delivered and every figure is there; never how fast.
func TestRunFanout(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, durable := range []bool{false, true} {
		var out, progress bytes.Buffer
		o := FanoutOptions{Subscribers: 3, Nodes: 1, Producers: 2, Window: 16, Messages: 200, Size: 64, Batch: 16,
			Durable: durable, Sync: "normal", JSON: true, Timeout: time.Minute}
		if err := RunFanout(context.Background(), o, &out, &progress); err != nil {
			t.Fatalf("durable %v: %v\n%s", durable, err, progress.String())
		}
		var r FanoutResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("stdout is not a fan-out result: %v\n%s", err, out.String())
		}
		if r.Scenario != "fanout" || r.Delivered != 600 || r.Durable != durable || r.Subscribers != 3 {
			t.Errorf("result %+v, want 600 copies delivered to 3 subscriptions, durable %v", r, durable)
		}
		for name, v := range map[string]float64{
			"publish_msgs_per_sec": r.PublishMsgsPerSec, "delivered_msgs_per_sec": r.DeliveredMsgsPerSec,
			"baseline_anycast_msgs_per_sec": r.BaselineAnycastMsgsPerSec, "p99_ms": r.P99ms,
			"publish_ratio": r.PublishRatio, "delivered_ratio": r.DeliveredRatio,
			"baseline_cpu_us_per_msg": r.BaselineCPUUsPerMsg, "fanout_cpu_us_per_msg": r.FanoutCPUUsPerMsg, "cpu_ratio": r.CPURatio,
		} {
			if v <= 0 {
				t.Errorf("%s = %v, want > 0", name, v)
			}
		}
		if r.P50ms > r.P99ms || r.P99ms > r.MaxMs {
			t.Errorf("latencies p50 %v, p99 %v, max %v are out of order", r.P50ms, r.P99ms, r.MaxMs)
		}
	}
}

func TestRunFanoutRefusesFlags(t *testing.T) {
	ok := FanoutOptions{Subscribers: 1, Nodes: 1, Producers: 1, Window: 1, Messages: 1, Batch: 1, Sync: "full", Timeout: time.Minute}
	for _, tc := range []struct {
		mod  func(*FanoutOptions)
		want string
	}{
		{func(o *FanoutOptions) { o.Nodes = 2 }, `"--nodes" flag: want 1 or 3`},
		{func(o *FanoutOptions) { o.Subscribers = 0 }, `"--subscribers" flag: want at least 1`},
		{func(o *FanoutOptions) { o.Batch = 0 }, `"--batch" flag: want at least 1`},
		{func(o *FanoutOptions) { o.Sync = "fast" }, `"fast"`},
		{func(o *FanoutOptions) { o.Nodes, o.Runs = 3, 2 }, `--runs 2: rounds are measured on one node`},
		{func(o *FanoutOptions) { o.Runs = -1 }, `"--runs" flag: want at least 0`},
	} {
		o := ok
		tc.mod(&o)
		err := RunFanout(context.Background(), o, io.Discard, io.Discard)
		if _, isUsage := errors.AsType[*UsageError](err); !isUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunFanout(%+v) = %v, want a usage error saying %q", o, err, tc.want)
		}
	}
}

// TestRunFanoutRounds: with Runs 3 the bench measures three rounds on the
// same subscriptions, every copy of each delivered, and reports each
// round's figures and their medians.
func TestRunFanoutRounds(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out, progress bytes.Buffer
	o := FanoutOptions{Subscribers: 2, Nodes: 1, Producers: 2, Window: 16, Messages: 150, Size: 32, Batch: 8,
		Durable: true, Sync: "normal", Runs: 3, JSON: true, Timeout: time.Minute}
	if err := RunFanout(context.Background(), o, &out, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var r FanoutResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("stdout is not a fan-out result: %v\n%s", err, out.String())
	}
	if r.Runs != 3 || len(r.Rounds) != 3 || r.Delivered != 3*2*150 {
		t.Fatalf("runs %d, %d rounds, %d copies; want 3, 3 and 900", r.Runs, len(r.Rounds), r.Delivered)
	}
	var pub, ratios []float64
	for i, rd := range r.Rounds {
		if rd.PublishMsgsPerSec <= 0 || rd.DeliveredMsgsPerSec <= 0 || rd.BaselineAnycastMsgsPerSec <= 0 || rd.PublishRatio <= 0 {
			t.Errorf("round %d: %+v, want every rate and ratio above 0", i+1, rd)
		}
		pub, ratios = append(pub, rd.PublishMsgsPerSec), append(ratios, rd.PublishRatio)
	}
	if m := median(pub); r.PublishMsgsPerSec != m {
		t.Errorf("publish %v, want the rounds' median %v", r.PublishMsgsPerSec, m)
	}
	if m := median(ratios); r.PublishRatio != m {
		t.Errorf("publish ratio %v, want the rounds' median %v", r.PublishRatio, m)
	}
	for _, want := range []string{"round 1, baseline", "round 2, fan-out", "round 3, baseline"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}
