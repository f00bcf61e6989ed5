package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// FanoutAgentOptions are the flags of `bench agent fanout`: one node of
// `bench fanout --nodes 3`.
type FanoutAgentOptions struct {
	// Subscribers is how many subscriptions to FanoutSpace this node
	// makes, durable ones (named bench-<node>-<i>) with Durable; each is
	// drained by its own consumer until it delivered Expect messages.
	Subscribers, Expect int
	// Batch is how many messages a consumer takes per ReceiveBatch.
	Batch   int
	Durable bool
	// Publish, when above 0, makes this node the publisher: it first sends
	// Publish messages to the anycast address Addr with one consumer
	// draining it (the baseline), then waits until it learned WaitInterest
	// pieces of topic interest, then publishes Publish messages to
	// FanoutTopic, from Producers goroutines with Window sends in flight
	// each.
	Publish, Size, Producers, Window, WaitInterest int
}

// fanoutPublishedEvent is printed by the publisher once every publish is
// durable, every copy committed here.
type fanoutPublishedEvent struct {
	Event string `json:"event"` // "fanout-published"
	// StartNs is when the first publish was submitted, DurableNs when the
	// last was durable; Unix nanoseconds.
	StartNs   int64 `json:"start_ns"`
	DurableNs int64 `json:"durable_ns"`
	// BaselineMsgsPerSec is the same publisher's rate to the anycast
	// address Addr, measured just before.
	BaselineMsgsPerSec float64 `json:"baseline_msgs_per_sec"`
}

// fanoutConsumedEvent is printed once every subscription of the node
// delivered what it expected (at once with none). Latencies run from a
// publish's submit (the message's Timestamp) to its Receive here.
type fanoutConsumedEvent struct {
	Event     string  `json:"event"` // "fanout-consumed"
	Delivered int64   `json:"delivered"`
	LastNs    int64   `json:"last_ns"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

func (o FanoutAgentOptions) validate() error {
	for _, c := range []struct {
		flag   string
		v, min int
	}{
		{"subscribers", o.Subscribers, 0}, {"expect", o.Expect, 0}, {"batch", o.Batch, 1}, {"publish", o.Publish, 0}, {"size", o.Size, 0},
		{"producers", o.Producers, 1}, {"window", o.Window, 1}, {"wait-interest", o.WaitInterest, 0},
	} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	return nil
}

// RunAgentFanout runs `bench agent fanout`: it opens the node, prints its
// ready line, makes its subscriptions and drains them, publishes if it is
// the publisher, prints its events, and keeps the node open until stdin
// closes or a signal comes.
func RunAgentFanout(ctx context.Context, open OpenFunc, o FanoutAgentOptions, stdin io.Reader, stdout io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, open, stdout)
	if err != nil {
		return err
	}
	if err := a.fanout(ctx, o); err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

func (a *agent) fanout(ctx context.Context, o FanoutAgentOptions) error {
	subs := make([]*petrel.Consumer, 0, o.Subscribers)
	defer func() {
		for _, c := range subs {
			c.Close()
		}
	}()
	for i := range o.Subscribers {
		opts := petrel.SubscribeOptions{Durable: o.Durable}
		if o.Durable {
			opts.Name = fmt.Sprintf("bench-%s-%d", a.node.Name(), i)
		}
		c, err := a.node.Subscribe(ctx, FanoutSpace, opts)
		if err != nil {
			return fmt.Errorf("subscribe %d: %w", i, err)
		}
		subs = append(subs, c)
	}
	g := startDrainers(ctx, subs, int64(o.Expect), o.Batch)
	if o.Publish > 0 {
		if err := a.publishFanout(ctx, o); err != nil {
			g.stop()
			return err
		}
	}
	n, last, lat, err := g.wait()
	if err != nil {
		return fmt.Errorf("consume: %w (delivered %d of %d)", err, n, int64(o.Expect)*int64(o.Subscribers))
	}
	pct := lat.percentiles(50, 99, 100)
	return a.event(fanoutConsumedEvent{Event: "fanout-consumed", Delivered: n, LastNs: last.UnixNano(),
		P50ms: round(ms(pct[0]), 3), P99ms: round(ms(pct[1]), 3), MaxMs: round(ms(pct[2]), 3), PeakRSSMB: currentPeakRSS()})
}

// publishFanout runs the anycast baseline, waits for the other nodes'
// interest, publishes, and prints the published event.
func (a *agent) publishFanout(ctx context.Context, o FanoutAgentOptions) error {
	body := make([]byte, o.Size)
	baseline, err := measureAnycast(ctx, a.node, o.Publish, o.Producers, o.Window, o.Batch, body)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	if err := a.waitInterest(ctx, o.WaitInterest); err != nil {
		return err
	}
	start := time.Now()
	sent, err := sendAllTo(ctx, a.node.Producer(), FanoutTopic, o.Publish, o.Producers, o.Window, body, false)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return a.event(fanoutPublishedEvent{Event: "fanout-published", StartNs: start.UnixNano(), DurableNs: sent.last.UnixNano(),
		BaselineMsgsPerSec: round(baseline, 2)})
}
