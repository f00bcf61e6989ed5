package bench

import (
	"context"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// natsServer is the nats-server binary, or skips the test where it is not
// installed (CI does not install it); once the test is over, no goroutine
// of the NATS client may be left.
func natsServer(t *testing.T) string {
	t.Helper()
	exe, err := FindNATS("")
	if err != nil {
		t.Skipf("skipped: %v (apt-get install nats-server to run it)", err)
	}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	return exe
}

// runNATS measures a real nats-server with the client bench's workload,
// publish then consume and both at once: every figure there, the server
// stopped cleanly, and no goroutine of the NATS client left behind.
// Skipped where nats-server is not installed (CI does not install it).
func TestRunNATS(t *testing.T) {
	exe := natsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, concurrent := range []bool{false, true} {
		w := natsWorkload{Producers: 2, Window: 50, Messages: 1000, Size: 64, Consumers: 2, ConsumerWindow: 20, Concurrent: concurrent}
		f, err := runNATS(ctx, ctx, exe, t.TempDir(), w, io.Discard)
		if err != nil {
			t.Fatalf("concurrent %v: %v", concurrent, err)
		}
		if f.PublishMsgsPerSec <= 0 || f.ConsumeMsgsPerSec <= 0 || f.P99ms <= 0 || f.ServerPeakRSSMB <= 0 || f.Pid <= 0 {
			t.Errorf("concurrent %v: figures %+v, want every one measured", concurrent, f)
		}
	}
}

// A publish-only workload (Consumers 0) measures publishing and nothing
// else.
func TestRunNATSPublishOnly(t *testing.T) {
	exe := natsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := runNATS(ctx, ctx, exe, t.TempDir(), natsWorkload{Producers: 1, Window: 10, Messages: 200, Size: 8}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.PublishMsgsPerSec <= 0 || f.ConsumeMsgsPerSec != 0 {
		t.Errorf("figures %+v: want a publish rate and no consume rate", f)
	}
}
