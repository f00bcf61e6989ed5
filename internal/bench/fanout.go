package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/queue"
)

// The fan-out bench: one publisher to a topic with N subscriptions, each
// drained by its own consumer, beside the same publisher to one anycast
// address in the same run, on the same node, so that the two figures are
// comparable.

// FanoutTopic is the topic the fan-out bench publishes to, in the topic
// space FanoutSpace; every subscription's pattern is FanoutSpace.
const (
	FanoutTopic = "fanout.bench"
	FanoutSpace = "fanout.#"
)

// FanoutOptions are the flags of `bench fanout`.
type FanoutOptions struct {
	Subscribers, Nodes, Producers, Window, Messages, Size int
	// Batch is how many messages a subscription's consumer takes per
	// ReceiveBatch; 1 takes them one at a time.
	Batch int
	// Durable makes the subscriptions durable (named); otherwise they are
	// private non-durable ones.
	Durable bool
	// Sync is the store's sync mode as the config file spells it.
	Sync string
	// Runs is how many rounds the bench measures on one node, each a
	// baseline and a fan-out; the figures are the medians. 0 is 1.
	Runs    int
	JSON    bool
	Timeout time.Duration
}

// FanoutResult is the JSON object of `bench fanout --json`. The field
// names are a contract with the scripts that compare runs: add, never
// rename.
type FanoutResult struct {
	Scenario    string `json:"scenario"`
	Nodes       int    `json:"nodes"`
	Subscribers int    `json:"subscribers"`
	Durable     bool   `json:"durable"`
	Messages    int    `json:"messages"`
	Size        int    `json:"size"`
	Sync        string `json:"sync"`
	Producers   int    `json:"producers"`
	Window      int    `json:"window"`
	// Batch is what each consumer took per ReceiveBatch, at most.
	Batch int `json:"batch"`
	// PublishMsgsPerSec is messages / (first publish submitted -> last
	// publish durable, every copy committed).
	PublishMsgsPerSec float64 `json:"publish_msgs_per_sec"`
	// DeliveredMsgsPerSec is copies acked by all the subscriptions'
	// consumers / (first publish submitted -> last copy acked).
	DeliveredMsgsPerSec float64 `json:"delivered_msgs_per_sec"`
	Delivered           int64   `json:"delivered"`
	// P50ms, P99ms and MaxMs time publish -> delivery: from a message's
	// submit to its Receive by a subscription's consumer, over every copy,
	// counted in a latencyHist (within 0.4%; MaxMs exact).
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// BaselineAnycastMsgsPerSec is the same publisher's rate to one
	// anycast address, with one consumer draining it, in the same run.
	BaselineAnycastMsgsPerSec float64 `json:"baseline_anycast_msgs_per_sec"`
	// PublishRatio and DeliveredRatio divide the fan-out rates by the
	// baseline.
	PublishRatio   float64 `json:"publish_ratio"`
	DeliveredRatio float64 `json:"delivered_ratio"`
	// BaselineCPUUsPerMsg and FanoutCPUUsPerMsg are the process's CPU time
	// (user and system, the node's and the bench's goroutines alike) from
	// the first publish to the last copy acked, per message published, in
	// the baseline and in the fan-out; CPURatio divides the second by the
	// first. Where both phases keep every core busy, the fan-out's rates
	// follow its CPU: publish 0.5x the baseline needs CPURatio 2 at most,
	// whatever the machine, which says how much a target needs taken
	// from a message's copies. Only with --nodes 1.
	BaselineCPUUsPerMsg float64 `json:"baseline_cpu_us_per_msg,omitempty"`
	FanoutCPUUsPerMsg   float64 `json:"fanout_cpu_us_per_msg,omitempty"`
	CPURatio            float64 `json:"cpu_ratio,omitempty"`
	// PeakRSSMB is the process's peak RSS; with --nodes 3 the largest of
	// the nodes', each of which is in PerNode.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// PerNode holds each node's figures with --nodes 3: its subscriptions,
	// the copies they delivered, their latency and its peak RSS. The
	// top-level p50_ms, p99_ms and max_ms are then the worst node's.
	PerNode []FanoutNodeFigures `json:"per_node,omitempty"`
	// Runs is the rounds measured. With more than one, the rates and the
	// ratios above are the medians of Rounds' (each ratio the median of
	// the rounds' ratios, not a ratio of medians), the latencies are over
	// every round's copies, and Delivered is the total.
	Runs      int           `json:"runs"`
	Rounds    []FanoutRound `json:"rounds,omitempty"`
	CPUs      int           `json:"cpus"`
	GoVersion string        `json:"go_version"`
}

// FanoutRound is one round of a bench of several: a baseline and a
// fan-out, measured one after the other, in turns.
type FanoutRound struct {
	PublishMsgsPerSec         float64 `json:"publish_msgs_per_sec"`
	DeliveredMsgsPerSec       float64 `json:"delivered_msgs_per_sec"`
	BaselineAnycastMsgsPerSec float64 `json:"baseline_anycast_msgs_per_sec"`
	PublishRatio              float64 `json:"publish_ratio"`
	DeliveredRatio            float64 `json:"delivered_ratio"`
	BaselineCPUUsPerMsg       float64 `json:"baseline_cpu_us_per_msg,omitempty"`
	FanoutCPUUsPerMsg         float64 `json:"fanout_cpu_us_per_msg,omitempty"`
	CPURatio                  float64 `json:"cpu_ratio,omitempty"`
}

func (o FanoutOptions) validate() (queue.SyncMode, error) {
	for _, c := range []struct {
		flag string
		v    int
		min  int
	}{
		{"subscribers", o.Subscribers, 1}, {"producers", o.Producers, 1}, {"window", o.Window, 1}, {"batch", o.Batch, 1},
		{"messages", o.Messages, 1}, {"size", o.Size, 0}, {"runs", o.Runs, 0},
	} {
		if c.v < c.min {
			return 0, usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	switch o.Nodes {
	case 1, 3:
	default:
		return 0, usageErrorf("invalid argument %d for \"--nodes\" flag: want 1 or 3", o.Nodes)
	}
	if o.Nodes == 3 && o.Runs > 1 {
		return 0, usageErrorf("--runs %d: rounds are measured on one node; with --nodes 3, run the bench again", o.Runs)
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return 0, err
	}
	return parseSync(o.Sync)
}

// RunFanout runs `bench fanout` on one embedded node, or with o.Nodes 3
// on three node processes (fanout_procs.go). It prints the
// figures, or one JSON object with o.JSON, on stdout, and progress and the
// node's warnings on stderr.
func RunFanout(ctx context.Context, o FanoutOptions, stdout, stderr io.Writer) (err error) {
	mode, err := o.validate()
	if err != nil {
		return err
	}
	if o.Nodes == 3 {
		return runFanoutNodes(ctx, o, stdout, stderr)
	}
	b := nodeBench{dataDir: "", timeout: o.Timeout, json: o.JSON,
		config: petrel.Config{Store: queue.Config{Sync: mode}, Topics: []petrel.TopicConfig{{Pattern: FanoutSpace}}}}
	return b.run(ctx, stdout, stderr, func(ctx context.Context, node *petrel.Node) (figurer, error) {
		// PETREL_CPUPROFILE profiles the whole run, baseline included.
		stop, err := cpuProfile("fanout")
		if err != nil {
			return nil, err
		}
		r, err := measureFanout(ctx, node, o, stderr)
		return r, errors.Join(err, stop())
	})
}

// measureFanout runs o.Runs rounds of the anycast baseline and the
// fan-out, in turns (even rounds the baseline first, odd ones the
// fan-out), on the same subscriptions, and returns the figures.
func measureFanout(ctx context.Context, node *petrel.Node, o FanoutOptions, progress io.Writer) (*FanoutResult, error) {
	body := make([]byte, o.Size)
	subs, err := subscribeAll(ctx, node, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range subs {
			c.Close()
		}
	}()
	var (
		rounds    []FanoutRound
		lat       latencyHist
		delivered int64
	)
	for i := range max(o.Runs, 1) {
		var rd FanoutRound
		baseline := func() error {
			fmt.Fprintf(progress, "round %d, baseline: %d messages to the anycast address %q...\n", i+1, o.Messages, Addr)
			cpu := startCPU()
			b, err := measureAnycast(ctx, node, o.Messages, o.Producers, o.Window, o.Batch, body)
			if err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
			rd.BaselineAnycastMsgsPerSec = b
			rd.BaselineCPUUsPerMsg = cpu.usPer(o.Messages)
			return nil
		}
		if i%2 == 0 {
			if err := baseline(); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(progress, "round %d, fan-out: %d messages to %q, %d subscriptions...\n", i+1, o.Messages, FanoutTopic, o.Subscribers)
		cpu := startCPU()
		g := startDrainers(ctx, subs, int64(o.Messages), o.Batch)
		start := time.Now()
		sent, err := sendAllTo(ctx, node.Producer(), FanoutTopic, o.Messages, o.Producers, o.Window, body, false)
		if err != nil {
			g.stop()
			return nil, fmt.Errorf("publish: %w", err)
		}
		n, end, l, err := g.wait()
		if err != nil {
			return nil, fmt.Errorf("consume: %w (delivered %d of %d)", err, n, int64(o.Messages)*int64(o.Subscribers))
		}
		rd.FanoutCPUUsPerMsg = cpu.usPer(o.Messages)
		rd.PublishMsgsPerSec = rate(int64(o.Messages), sent.last.Sub(start))
		rd.DeliveredMsgsPerSec = rate(n, end.Sub(start))
		if i%2 == 1 {
			if err := baseline(); err != nil {
				return nil, err
			}
		}
		rounds = append(rounds, rd)
		lat.merge(l)
		delivered += n
	}
	return o.result(rounds, delivered, &lat), nil
}

// measureAnycast sends messages messages to the anycast address Addr
// while one consumer drains it, taking batch at a time as the fan-out's
// do, and returns the publish rate.
func measureAnycast(ctx context.Context, node *petrel.Node, messages, producers, window, batch int, body []byte) (float64, error) {
	c, err := node.Consumer(Addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	g := startDrainers(ctx, []*petrel.Consumer{c}, int64(messages), batch)
	start := time.Now()
	sent, err := sendAllTo(ctx, node.Producer(), Addr, messages, producers, window, body, false)
	if err != nil {
		g.stop()
		return 0, err
	}
	if _, _, _, err := g.wait(); err != nil {
		return 0, fmt.Errorf("drain: %w", err)
	}
	return rate(int64(messages), sent.last.Sub(start)), nil
}

// subscribeAll makes the subscriptions, durable ones named bench-<i>.
func subscribeAll(ctx context.Context, node *petrel.Node, o FanoutOptions) ([]*petrel.Consumer, error) {
	subs := make([]*petrel.Consumer, 0, o.Subscribers)
	for i := range o.Subscribers {
		opts := petrel.SubscribeOptions{Durable: o.Durable}
		if o.Durable {
			opts.Name = fmt.Sprintf("bench-%d", i)
		}
		c, err := node.Subscribe(ctx, FanoutSpace, opts)
		if err != nil {
			for _, c := range subs {
				c.Close()
			}
			return nil, fmt.Errorf("subscribe %d: %w", i, err)
		}
		subs = append(subs, c)
	}
	return subs, nil
}

// result assembles the figures of a finished run from its rounds.
func (o FanoutOptions) result(rounds []FanoutRound, n int64, lat *latencyHist) *FanoutResult {
	pct := lat.percentiles(50, 99, 100)
	rss, err := nodeproc.PeakRSSMB()
	if err != nil {
		rss = 0 // reported as 0 where /proc is missing; the bench still stands
	}
	ratio := func(x, baseline float64) float64 {
		if baseline <= 0 {
			return 0
		}
		return round(x/baseline, 3)
	}
	for i := range rounds {
		rd := &rounds[i]
		rd.PublishRatio = ratio(rd.PublishMsgsPerSec, rd.BaselineAnycastMsgsPerSec)
		rd.DeliveredRatio = ratio(rd.DeliveredMsgsPerSec, rd.BaselineAnycastMsgsPerSec)
		rd.CPURatio = ratio(rd.FanoutCPUUsPerMsg, rd.BaselineCPUUsPerMsg)
		rd.BaselineCPUUsPerMsg = round(rd.BaselineCPUUsPerMsg, 3)
		rd.FanoutCPUUsPerMsg = round(rd.FanoutCPUUsPerMsg, 3)
		rd.PublishMsgsPerSec = round(rd.PublishMsgsPerSec, 2)
		rd.DeliveredMsgsPerSec = round(rd.DeliveredMsgsPerSec, 2)
		rd.BaselineAnycastMsgsPerSec = round(rd.BaselineAnycastMsgsPerSec, 2)
	}
	med := func(get func(FanoutRound) float64) float64 {
		v := make([]float64, len(rounds))
		for i, rd := range rounds {
			v[i] = get(rd)
		}
		return median(v)
	}
	r := &FanoutResult{
		Scenario: "fanout", Nodes: o.Nodes, Subscribers: o.Subscribers, Durable: o.Durable,
		Messages: o.Messages, Size: o.Size, Sync: o.Sync, Producers: o.Producers, Window: o.Window, Batch: o.Batch,
		PublishMsgsPerSec:         round(med(func(rd FanoutRound) float64 { return rd.PublishMsgsPerSec }), 2),
		DeliveredMsgsPerSec:       round(med(func(rd FanoutRound) float64 { return rd.DeliveredMsgsPerSec }), 2),
		Delivered:                 n,
		P50ms:                     round(ms(pct[0]), 3),
		P99ms:                     round(ms(pct[1]), 3),
		MaxMs:                     round(ms(pct[2]), 3),
		BaselineAnycastMsgsPerSec: round(med(func(rd FanoutRound) float64 { return rd.BaselineAnycastMsgsPerSec }), 2),
		PublishRatio:              med(func(rd FanoutRound) float64 { return rd.PublishRatio }),
		DeliveredRatio:            med(func(rd FanoutRound) float64 { return rd.DeliveredRatio }),
		BaselineCPUUsPerMsg:       med(func(rd FanoutRound) float64 { return rd.BaselineCPUUsPerMsg }),
		FanoutCPUUsPerMsg:         med(func(rd FanoutRound) float64 { return rd.FanoutCPUUsPerMsg }),
		CPURatio:                  med(func(rd FanoutRound) float64 { return rd.CPURatio }),
		PeakRSSMB:                 round(rss, 2),
		Runs:                      len(rounds),
		CPUs:                      runtime.NumCPU(),
		GoVersion:                 runtime.Version(),
	}
	if len(rounds) > 1 {
		r.Rounds = rounds
	}
	return r
}

func (r *FanoutResult) figures() []figure {
	kind := "non-durable"
	if r.Durable {
		kind = "durable"
	}
	where := "1 node"
	if r.Nodes == 3 {
		where = "3 node processes in a line (publisher at n1, n2 relays to n3)"
	}
	figs := []figure{
		{"scenario", fmt.Sprintf("fanout: %s, %d %s subscriptions (consumers take up to %d per ReceiveBatch), %d producers (window %d), %d messages of %d B, sync %s",
			where, r.Subscribers, kind, r.Batch, r.Producers, r.Window, r.Messages, r.Size, r.Sync)},
		{"publish", fmt.Sprintf("%.0f msgs/s (%.2fx the anycast baseline)", r.PublishMsgsPerSec, r.PublishRatio)},
		{"delivered", fmt.Sprintf("%.0f msgs/s (%d copies; %.2fx the anycast baseline)", r.DeliveredMsgsPerSec, r.Delivered, r.DeliveredRatio)},
		{"anycast baseline", fmt.Sprintf("%.0f msgs/s (same producers to one address)", r.BaselineAnycastMsgsPerSec)},
		{"delivery latency p50", fmt.Sprintf("%.3f ms", r.P50ms)},
		{"delivery latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"delivery latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
		{"peak RSS", fmt.Sprintf("%.1f MiB", r.PeakRSSMB)},
	}
	if r.CPURatio > 0 {
		figs = append(figs, figure{"CPU per message", fmt.Sprintf("%.2f us fan-out, %.2f us anycast baseline (%.2fx; publish 0.5x the baseline, on a machine whose cores both phases keep busy, needs 2x at most)",
			r.FanoutCPUUsPerMsg, r.BaselineCPUUsPerMsg, r.CPURatio)})
	}
	if len(r.PerNode) > 0 {
		figs[4].name, figs[5].name = "delivery latency p50 (worst node)", "delivery latency p99 (worst node)"
		figs[len(figs)-1].name = "peak RSS (largest node)"
	}
	if len(r.Rounds) > 1 {
		figs[0].value += fmt.Sprintf("; the rates and ratios are the medians of %d rounds", len(r.Rounds))
		for i, rd := range r.Rounds {
			f := figure{fmt.Sprintf("round %d", i+1), fmt.Sprintf("publish %.0f msgs/s (%.2fx), delivered %.0f msgs/s (%.2fx), baseline %.0f msgs/s",
				rd.PublishMsgsPerSec, rd.PublishRatio, rd.DeliveredMsgsPerSec, rd.DeliveredRatio, rd.BaselineAnycastMsgsPerSec)}
			if rd.CPURatio > 0 {
				f.value += fmt.Sprintf(", CPU per message %.2fx the baseline's", rd.CPURatio)
			}
			figs = append(figs, f)
		}
	}
	for _, n := range r.PerNode {
		figs = append(figs, figure{"node " + n.Node, fmt.Sprintf("%d subscriptions, %d copies, p50 %.3f ms, p99 %.3f ms, peak RSS %.1f MiB",
			n.Subscribers, n.Delivered, n.P50ms, n.P99ms, n.PeakRSSMB)})
	}
	return figs
}

// cpuMark is the process's CPU time at the start of a phase.
type cpuMark struct {
	at time.Duration
	ok bool
}

func startCPU() cpuMark {
	at, ok := processCPU()
	return cpuMark{at, ok}
}

// usPer is the CPU time since m, in microseconds per one of n messages; 0
// where the system does not say.
func (m cpuMark) usPer(n int) float64 {
	now, ok := processCPU()
	if !m.ok || !ok || n <= 0 {
		return 0
	}
	return float64(now-m.at) / float64(time.Microsecond) / float64(n)
}
