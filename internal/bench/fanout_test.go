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
	} {
		o := ok
		tc.mod(&o)
		err := RunFanout(context.Background(), o, io.Discard, io.Discard)
		if _, isUsage := errors.AsType[*UsageError](err); !isUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunFanout(%+v) = %v, want a usage error saying %q", o, err, tc.want)
		}
	}
}
