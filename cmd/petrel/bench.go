package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

// The `petrel bench` commands: their flags and help live here, what they
// do in internal/bench.

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Petrel's throughput, latency and memory",
		Long: `Measure Petrel's throughput, latency and memory on this machine.

Each subcommand is one scenario. Human output is one line per figure; with
--json, stdout holds exactly one JSON object and progress goes to stderr.
Rates are messages per second, latencies milliseconds, memory the process's
peak resident set size (VmHWM) in MiB.`,
	}
	parentCommand(cmd)
	cmd.AddCommand(newBenchLocalCmd())
	cmd.AddCommand(newBenchLinkCmd(), newBenchAgentCmd(), newBenchClientCmd())
	cmd.AddCommand(newBenchFileCmd(), newBenchFanoutCmd(), newBenchMQTTCmd())
	return cmd
}

// runBench runs a bench until it ends or SIGINT or SIGTERM comes.
func runBench(cmd *cobra.Command, run func(ctx context.Context, stdout, stderr io.Writer) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return benchError(run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr()))
}

// benchError makes a bad flag value that a bench or agent refused a usage
// error: exit 2, with usage.
func benchError(err error) error {
	if _, ok := errors.AsType[*bench.UsageError](err); ok {
		return &exitError{code: exitUsage, usage: true, err: err}
	}
	return err
}

func newBenchLocalCmd() *cobra.Command {
	var o bench.LocalOptions
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

--against-nats also measures NATS JetStream with the same workload, once
the node's run is over: a nats-server of the bench's own (-js, its store
in a temporary directory), a file-storage work-queue stream, --producers
connections each keeping --window async publishes awaiting their PubAck,
and --consumers connections sharing one durable pull consumer (1000
messages pulled ahead each) that consume while the producers publish.
JetStream's file store fsyncs on a timer (sync_interval, 2 minutes by
default), not per message as sync full does. Figures under "nats" in the
JSON; enqueue_ratio_to_nats and end_to_end_ratio_to_nats are Petrel's
rates over NATS's. --prefill applies to Petrel's run only.

Without --data-dir the node lives in a temporary directory removed at the
end; with it, the directory is kept, and its bench address must be empty.`,
		Example: `  petrel bench local
  petrel bench local --sync normal --json
  petrel bench local --prefill 1000000 --messages 200000 --json
  petrel bench local --against-nats`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunLocal(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Producers, "producers", 64, "producer goroutines")
	f.IntVar(&o.Consumers, "consumers", 4, "consumer goroutines")
	f.IntVar(&o.Messages, "messages", 200000, "messages to send and consume")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes`")
	f.StringVar(&o.Sync, "sync", "full", "store sync mode: full or normal")
	f.IntVar(&o.Window, "window", 1024, "sends in flight per producer")
	f.IntVar(&o.Prefill, "prefill", 0, "messages put in the queue before measuring")
	f.StringVar(&o.DataDir, "data-dir", "", "node data `directory` (default: a temporary directory, removed)")
	f.BoolVar(&o.AgainstNATS, "against-nats", false, "measure NATS JetStream (file storage) with the same workload too, as the baseline")
	f.StringVar(&o.NATS, "nats", "", "nats-server `binary` (default: on PATH, else "+bench.DefaultNATS+")")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}
