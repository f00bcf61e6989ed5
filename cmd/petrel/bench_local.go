package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/queue"
	"github.com/spf13/cobra"
)

// benchAddr is the one address a local bench sends to and consumes from.
const benchAddr = "bench"

type localOptions struct {
	producers, consumers, messages, size, window, prefill int
	sync, dataDir                                         string
	json                                                  bool
	timeout                                               time.Duration
}

// localResult is the JSON object of `bench local --json`. The field names
// are a contract with the scripts that compare runs: add, never rename.
type localResult struct {
	Scenario          string  `json:"scenario"`
	Messages          int     `json:"messages"`
	Size              int     `json:"size"`
	Sync              string  `json:"sync"`
	Producers         int     `json:"producers"`
	Consumers         int     `json:"consumers"`
	Window            int     `json:"window"`
	Prefill           int     `json:"prefill"`
	EnqueueMsgsPerSec float64 `json:"enqueue_msgs_per_sec"`
	MsgsPerSec        float64 `json:"msgs_per_sec"`
	Acked             int64   `json:"acked"`
	EnqueueSeconds    float64 `json:"enqueue_seconds"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
	PeakRSSMB         float64 `json:"peak_rss_mb"`
	CPUs              int     `json:"cpus"`
	GoVersion         string  `json:"go_version"`
}

func newBenchLocalCmd() *cobra.Command {
	var o localOptions
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Producers and consumers of one address on one embedded node",
		Long: `Measure one embedded node: --producers goroutines send --messages messages
of --size bytes to one address with SendAsync, each keeping --window sends in
flight, while --consumers goroutines Receive and Ack them.

Figures:
  enqueue_msgs_per_sec  messages / (first submitted -> last send durable)
  msgs_per_sec          messages acked / (first submitted -> last acked)
  p50_ms, p99_ms        send latency, submit -> durable, over every send
  peak_rss_mb           peak resident set size of the process (VmHWM)

--prefill P puts P messages into the same address before the clock starts,
with the same API, untimed, to measure with a deep backlog. The consumers
start after the prefill and drain the backlog too (FIFO within a priority),
so msgs_per_sec then counts P + messages acked.

Without --data-dir the node lives in a temporary directory removed at the
end; with it, the directory is kept, and its bench address must be empty.`,
		Example: `  petrel bench local
  petrel bench local --sync normal --json
  petrel bench local --prefill 1000000 --messages 200000 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBenchLocal(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.producers, "producers", 64, "producer goroutines")
	f.IntVar(&o.consumers, "consumers", 4, "consumer goroutines")
	f.IntVar(&o.messages, "messages", 200000, "messages to send and consume")
	f.IntVar(&o.size, "size", 128, "body size in `bytes`")
	f.StringVar(&o.sync, "sync", "full", "store sync mode: full or normal")
	f.IntVar(&o.window, "window", 1024, "sends in flight per producer")
	f.IntVar(&o.prefill, "prefill", 0, "messages put in the queue before measuring")
	f.StringVar(&o.dataDir, "data-dir", "", "node data `directory` (default: a temporary directory, removed)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func (o localOptions) validate() (queue.SyncMode, error) {
	for _, c := range []struct {
		flag string
		v    int
		min  int
	}{
		{"producers", o.producers, 1}, {"consumers", o.consumers, 1}, {"messages", o.messages, 1},
		{"size", o.size, 0}, {"window", o.window, 1}, {"prefill", o.prefill, 0},
	} {
		if c.v < c.min {
			return 0, usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.timeout <= 0 {
		return 0, usageErrorf("invalid argument %v for \"--timeout\" flag: want a positive duration", o.timeout)
	}
	return parseSync(o.sync)
}

func runBenchLocal(ctx context.Context, o localOptions, stdout, stderr io.Writer) (err error) {
	mode, err := o.validate()
	if err != nil {
		return err
	}
	dir, cleanup, err := benchDataDir(o.dataDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	node, err := petrel.Open(ctx, petrel.Config{
		Name:    "bench",
		DataDir: dir,
		Store:   queue.Config{Sync: mode},
		Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := node.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close node: %w", cerr))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, err := measureLocal(ctx, node, o, stderr)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(stdout, res)
	}
	return writeFigures(stdout, res.figures())
}

// benchDataDir returns the directory to run in and how to clean it up: a
// temporary directory is removed, one the user named is kept.
func benchDataDir(dir string) (string, func() error, error) {
	if dir != "" {
		return dir, func() error { return nil }, nil
	}
	tmp, err := os.MkdirTemp("", "petrel-bench-*")
	if err != nil {
		return "", nil, fmt.Errorf("make bench directory: %w", err)
	}
	return tmp, func() error { return os.RemoveAll(tmp) }, nil
}

// measureLocal runs the workload on node and returns its figures.
func measureLocal(ctx context.Context, node *petrel.Node, o localOptions, progress io.Writer) (*localResult, error) {
	c, err := node.Consumer(benchAddr)
	if err != nil {
		return nil, err
	}
	if s, _ := queueStats(node, benchAddr); s.Depth > 0 {
		return nil, fmt.Errorf("address %q in the data directory already holds %d messages: use an empty directory", benchAddr, s.Depth)
	}
	p := node.Producer()
	body := make([]byte, o.size)
	if o.prefill > 0 {
		fmt.Fprintf(progress, "prefilling %d messages...\n", o.prefill)
		start := time.Now()
		if _, err := sendAll(ctx, p, o.prefill, o.producers, o.window, body, false); err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		fmt.Fprintf(progress, "prefilled %d messages in %v\n", o.prefill, time.Since(start).Round(time.Millisecond))
	}

	target := int64(o.prefill + o.messages)
	cg := startConsumers(ctx, c, o.consumers, target)
	start := time.Now()
	sent, err := sendAll(ctx, p, o.messages, o.producers, o.window, body, true)
	if err != nil {
		cg.stop()
		return nil, fmt.Errorf("send: %w", err)
	}
	acked, end, err := cg.wait()
	if err != nil {
		return nil, fmt.Errorf("consume: %w (acked %d of %d)", err, acked, target)
	}
	return o.result(sent, start, acked, end.Sub(start)), nil
}

// result assembles the figures of a finished run.
func (o localOptions) result(sent *sendResult, start time.Time, acked int64, elapsed time.Duration) *localResult {
	enqueue := sent.last.Sub(start)
	pct := sent.lat.percentiles(50, 99, 100)
	rss, err := peakRSSMB()
	if err != nil {
		rss = 0 // reported as 0 where /proc is missing; the bench still stands
	}
	return &localResult{
		Scenario: "local", Messages: o.messages, Size: o.size, Sync: o.sync,
		Producers: o.producers, Consumers: o.consumers, Window: o.window, Prefill: o.prefill,
		EnqueueMsgsPerSec: round(rate(int64(o.messages), enqueue), 2),
		MsgsPerSec:        round(rate(acked, elapsed), 2),
		Acked:             acked,
		EnqueueSeconds:    round(enqueue.Seconds(), 3),
		ElapsedSeconds:    round(elapsed.Seconds(), 3),
		P50ms:             round(ms(pct[0]), 3),
		P99ms:             round(ms(pct[1]), 3),
		MaxMs:             round(ms(pct[2]), 3),
		PeakRSSMB:         round(rss, 2),
		CPUs:              runtime.NumCPU(),
		GoVersion:         runtime.Version(),
	}
}

func (r *localResult) figures() []figure {
	return []figure{
		{"scenario", fmt.Sprintf("local: %d producers (window %d), %d consumers, %d messages of %d B, sync %s, prefill %d",
			r.Producers, r.Window, r.Consumers, r.Messages, r.Size, r.Sync, r.Prefill)},
		{"enqueue", fmt.Sprintf("%.0f msgs/s (%d durable in %.3f s)", r.EnqueueMsgsPerSec, r.Messages, r.EnqueueSeconds)},
		{"end-to-end", fmt.Sprintf("%.0f msgs/s (%d acked in %.3f s)", r.MsgsPerSec, r.Acked, r.ElapsedSeconds)},
		{"send latency p50", fmt.Sprintf("%.3f ms", r.P50ms)},
		{"send latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"send latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
		{"peak RSS", fmt.Sprintf("%.1f MiB", r.PeakRSSMB)},
	}
}
