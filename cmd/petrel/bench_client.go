package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

type clientOptions struct {
	producers, consumers, messages, size, window, consumerWindow int
	sync                                                         string
	json, concurrent                                             bool
	timeout                                                      time.Duration
}

// clientResult is the JSON object of `bench client --json`. The field
// names are a contract with the scripts that compare runs: add, never
// rename.
type clientResult struct {
	Scenario       string `json:"scenario"`
	Messages       int    `json:"messages"`
	Size           int    `json:"size"`
	Sync           string `json:"sync"`
	Producers      int    `json:"producers"`
	Consumers      int    `json:"consumers"`
	Window         int    `json:"window"`
	ConsumerWindow int    `json:"consumer_window"`
	Concurrent     bool   `json:"concurrent"`
	// PublishMsgsPerSec: messages / (first submit -> last publish acked
	// durable by the node).
	PublishMsgsPerSec float64 `json:"publish_msgs_per_sec"`
	// ConsumeMsgsPerSec: messages / (consumers start -> last ack sent);
	// with --concurrent they start with the producers.
	ConsumeMsgsPerSec float64 `json:"consume_msgs_per_sec"`
	PublishSeconds    float64 `json:"publish_seconds"`
	ConsumeSeconds    float64 `json:"consume_seconds"`
	// Publish latency, submit -> the node's ack (durable), over every send.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// NodePeakRSSMB is the node process's VmHWM; ClientPeakRSSMB this
	// process's, which runs every client.
	NodePeakRSSMB   float64 `json:"node_peak_rss_mb"`
	ClientPeakRSSMB float64 `json:"client_peak_rss_mb"`
	NodePid         int     `json:"node_pid"`
	CPUs            int     `json:"cpus"`
	GoVersion       string  `json:"go_version"`
}

func newBenchClientCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Remote clients producing and consuming through a node process",
		Long: `Measure remote clients (petrel.Dial) on loopback: a petrel node runs as its own
process, and this process dials it with --producers clients that publish
--messages data messages of --size bytes to the address bench, each keeping
--window publishes in flight, and --consumers clients that consume and ack
them, each with --consumer-window deliveries pushed ahead.

By default the producers publish everything first and the consumers then
drain the backlog, so each rate is measured alone; with --concurrent both
run at once.

Figures:
  publish_msgs_per_sec  messages / (first submit -> last publish the node
                        acked as durable)
  consume_msgs_per_sec  messages / (consumers start -> last ack sent)
  p50_ms, p99_ms        publish latency, submit -> durable at the node
  node_peak_rss_mb      the node process's peak resident set size (VmHWM)
  client_peak_rss_mb    this process's, which runs every client

The node's configuration, data and stderr live in a temporary directory,
removed at the end; the node is stopped before the bench returns, also on
failure or SIGINT.`,
		Example: `  petrel bench client
  petrel bench client --producers 1 --consumers 1 --messages 200000 --size 128 --json
  petrel bench client --concurrent --producers 4 --consumers 2`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBenchClient(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.producers, "producers", 1, "producing clients, each its own connection")
	f.IntVar(&o.consumers, "consumers", 1, "consuming clients, each its own connection")
	f.IntVar(&o.messages, "messages", 200000, "messages to publish and consume")
	f.IntVar(&o.size, "size", 128, "body size in `bytes`")
	f.IntVar(&o.window, "window", 1000, "publishes in flight per producer")
	f.IntVar(&o.consumerWindow, "consumer-window", 1000, "deliveries pushed ahead per consumer")
	f.StringVar(&o.sync, "sync", "full", "the node's store sync mode: full or normal")
	f.BoolVar(&o.concurrent, "concurrent", false, "consume while publishing, instead of after")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func (o clientOptions) validate() error {
	for _, c := range []struct {
		flag   string
		v, min int
	}{
		{"producers", o.producers, 1}, {"consumers", o.consumers, 1}, {"messages", o.messages, 1},
		{"size", o.size, 0}, {"window", o.window, 1}, {"consumer-window", o.consumerWindow, 1},
	} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.timeout <= 0 {
		return usageErrorf("invalid argument %v for \"--timeout\" flag: want a positive duration", o.timeout)
	}
	_, err := parseSync(o.sync)
	return err
}

func runBenchClient(ctx context.Context, o clientOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	b := procBench{name: "client", timeout: o.timeout, json: o.json}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		r := &linkRun{o: linkOptions{sync: o.sync}, exe: exe, dir: dir, progress: stderr, procs: map[string]*proc{}, life: life}
		ctx, r.died = context.WithCancelCause(ctx)
		defer r.died(nil)
		res, err := r.runClients(ctx, o)
		return res, r.stopped(err)
	})
}

// runClients starts the node and runs the clients against it.
func (r *linkRun) runClients(ctx context.Context, o clientOptions) (*clientResult, error) {
	node, info, err := r.startListening(ctx, "node", 0, func(listen string) ([]string, error) {
		// The node's session window bounds what a producer has in flight.
		cfg, err := r.fileFor(nodeFile{Name: "node", Listen: listen, Receive: []string{benchAddr}, Window: o.window})
		return []string{"node", "-c", cfg}, err
	})
	if err != nil {
		return nil, err
	}
	m, err := measureClients(ctx, "tcp://"+info.Listen, o, r.progress)
	if err != nil {
		return nil, err
	}
	res := o.result(m)
	res.NodePid = node.Pid()
	res.NodePeakRSSMB = r.rss(nil)["node"]
	return res, nil
}

// result assembles the figures of a finished run.
func (o clientOptions) result(m *clientMeasure) *clientResult {
	pct := m.lat.percentiles(50, 99, 100)
	rss, err := peakRSSMB()
	if err != nil {
		rss = 0 // reported as 0 where /proc is missing
	}
	return &clientResult{
		Scenario: "client", Messages: o.messages, Size: o.size, Sync: o.sync,
		Producers: o.producers, Consumers: o.consumers, Window: o.window, ConsumerWindow: o.consumerWindow,
		Concurrent:        o.concurrent,
		PublishMsgsPerSec: round(rate(int64(o.messages), m.publish), 2),
		ConsumeMsgsPerSec: round(rate(int64(o.messages), m.consume), 2),
		PublishSeconds:    round(m.publish.Seconds(), 3),
		ConsumeSeconds:    round(m.consume.Seconds(), 3),
		P50ms:             round(ms(pct[0]), 3),
		P99ms:             round(ms(pct[1]), 3),
		MaxMs:             round(ms(pct[2]), 3),
		ClientPeakRSSMB:   round(rss, 2),
		CPUs:              runtime.NumCPU(),
		GoVersion:         runtime.Version(),
	}
}

func (r *clientResult) figures() []figure {
	mode := "publish, then consume"
	if r.Concurrent {
		mode = "publish and consume at once"
	}
	return []figure{
		{"scenario", fmt.Sprintf("client: %d producers (window %d), %d consumers (window %d), %d messages of %d B, sync %s, %s",
			r.Producers, r.Window, r.Consumers, r.ConsumerWindow, r.Messages, r.Size, r.Sync, mode)},
		{"publish", fmt.Sprintf("%.0f msgs/s (%d durable at the node in %.3f s)", r.PublishMsgsPerSec, r.Messages, r.PublishSeconds)},
		{"consume", fmt.Sprintf("%.0f msgs/s (%d received and acked in %.3f s)", r.ConsumeMsgsPerSec, r.Messages, r.ConsumeSeconds)},
		{"publish latency p50", fmt.Sprintf("%.3f ms (submit -> durable at the node)", r.P50ms)},
		{"publish latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"publish latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
		{"peak RSS node", fmt.Sprintf("%.1f MiB", r.NodePeakRSSMB)},
		{"peak RSS clients", fmt.Sprintf("%.1f MiB (this process)", r.ClientPeakRSSMB)},
	}
}
