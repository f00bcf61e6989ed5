package main

import (
	"context"
	"io"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchLinkCmd() *cobra.Command {
	var o bench.LinkOptions
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Messages across one or two links, between node processes",
		Long: `Measure links on loopback, every node its own petrel process: a produces
(bench agent produce), b consumes (bench agent consume), and with --hops 2,
c relays (petrel node). a sends --messages data messages of --size bytes to
bench@b with --window sends in flight, paced at --rate messages/s if set.

Figures:
  msgs_per_sec          messages / (first submit at a -> last receive at b)
  enqueue_msgs_per_sec  messages / (first submit at a -> last send durable)
  p50_ms, p99_ms        submit at a -> receive at b; without --rate it is
                        mostly time queued behind the others
  rss_mb, peak_rss_mb   each node's peak resident set size (VmHWM), highest
  baseline_local_msgs_per_sec
                        bench local's enqueue rate (64 producers) on an
                        embedded node in the bench directory, measured first
                        in the same invocation with the same sync, size and
                        count (at most --baseline-messages, 200,000 by
                        default; 0 skips it); ratio_to_local is
                        msgs_per_sec over it
  fsync_p50_us          median of 4 KiB write + fsync in the bench directory
  commits, slow_commits, commit_max_ms
                        a's and b's group commits during the run: how many,
                        how many took over 10 ms, and the longest. A disk
                        that stalls (fsync_p50_us is only its median, before
                        the run) shows here, and so does what a p99 meets
  mib_per_sec           msgs_per_sec x --size in MiB/s: the bodies alone,
                        not the headers or frames around them
  baseline_raw_mib_per_sec, baseline_raw_bytes
                        the raw copy, bench file's baseline, measured first
                        in the same invocation: baseline_raw_bytes random
                        bytes (messages x size, at most 256 MiB) written to
                        a file in the bench directory, then copied over one
                        loopback TCP connection to another file, 1 MiB
                        buffers, fsync at the end; the faster of two copies.
                        ratio_to_raw is mib_per_sec over it. 0 with
                        --no-raw-baseline or --size 0

--queues N: a spreads the messages round robin over the addresses
bench-0..bench-<N-1> at b, so N send queues (each its own sender and
session) share one connection. a then waits until every send queue is
drained, and a second more, idle, and reports go_kib_per_queue and
rss_kib_per_queue: its memory grown from before the first send to then,
after a GC, divided by N, an upper bound of what an idle send queue costs,
since it counts the caches and buffers the burst grew too. Then a sends
one message to each of N more addresses, bench-N..bench-<2N-1>, waits
the same way, and reports more_go_kib_per_queue and more_rss_kib_per_queue:
the growth since the first sample, divided by N, the cost of one more idle
send queue. Past 1,024 sessions on a connection, a's links open another
connection to b. Each of a's commits costs a few rows per queue it
touches, however few messages each holds, and the producer's --window
sends wait on those commits: with many queues the rate follows the
window (with 1,000 queues, 8,192 ran at twice the rate of the default
1,024; one queue gains nothing).

--runs N measures N rounds, one after the other, each with its own
baselines (local enqueue, fsync, raw copy) measured first and then its own
nodes in a directory of its own, removed before the next round. The rates,
the baselines, the ratios and the latencies printed are the medians of the
rounds (each ratio the median of the rounds' ratios), and "rounds" in the
JSON holds each round's; the commits and the memory are those of the
round whose ratio_to_local is the median. On a shared machine one round
can land on a stalled disk: read the medians.

--backlog: with b down, a queues --messages messages (default 1,000,000),
then one at priority 9; b starts then. Figures: msgs_per_sec is the drain,
(messages + 1) / (b ready -> last receive at b); urgent_ms is b ready -> the
priority-9 message received at b; queued_rss_mb is a's VmHWM once its
backlog is queued. Senders reconnect with a backoff of 10ms to 100ms, so
urgent_ms includes up to 100ms before a (or c) finds b.

The nodes' configurations, data and stderr live in a temporary directory,
removed at the end; every node process is stopped before the bench returns,
also on failure or SIGINT.`,
		Example: `  petrel bench link
  petrel bench link --hops 2 --json
  petrel bench link --hops 1 --runs 3
  petrel bench link --rate 10000 --messages 100000 --json
  petrel bench link --backlog --json
  petrel bench link --queues 1000 --json
  petrel bench link --size 16384 --messages 20000 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Backlog && !cmd.Flags().Changed("messages") {
				o.Messages = bench.DefaultBacklog
			}
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunLink(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Hops, "hops", 1, "links between producer and consumer: 1 (a -> b) or 2 (a -> c -> b)")
	f.IntVar(&o.Messages, "messages", 200000, "messages to send (--backlog: 1000000)")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes`")
	f.StringVar(&o.Sync, "sync", "full", "store sync mode of every node: full or normal")
	f.Float64Var(&o.Rate, "rate", 0, "messages per second (0: as fast as the window allows)")
	f.IntVar(&o.Window, "window", 1024, "sends in flight at the producer")
	f.IntVar(&o.BaselineMessages, "baseline-messages", bench.DefaultBaselineMessages, "messages of the local baseline, at most --messages (0: no local baseline)")
	f.BoolVar(&o.NoRawBaseline, "no-raw-baseline", false, "skip the raw-copy baseline (disk -> loopback TCP -> disk of the same bytes)")
	f.IntVar(&o.Queues, "queues", 1, "spread the messages over this many addresses at b: as many send queues at a, one connection")
	f.BoolVar(&o.Backlog, "backlog", false, "queue the messages with b down, then start b")
	f.IntVar(&o.Runs, "runs", 1, "rounds, each with its own baselines and nodes; the figures are the medians (not with --backlog)")
	f.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}

func newBenchClientCmd() *cobra.Command {
	var o bench.ClientOptions
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Remote clients producing and consuming through a node process",
		Long: `Measure remote clients (petrel.Dial) on loopback: a petrel node runs as its own
process, and this process dials it with --producers clients that publish
--messages data messages of --size bytes to the address bench, each keeping
publishes in flight up to the client's window, and --consumers clients that
consume and ack them, each with --consumer-window deliveries pushed ahead.
The window is petrel.DialOptions' default unless --window (a count, also
written as the node's link.window) or --window-bytes (the bytes of the
encoded messages in flight) set it; in_flight in the JSON is what the two
allow with messages of --size.

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
  baseline_local_msgs_per_sec, fsync_p50_us
                        as for bench link, measured first in the same
                        invocation; ratio_to_local is publish_msgs_per_sec
                        over the local baseline

--against-nats also measures NATS JetStream with the same workload, once
the node has stopped: a nats-server of the bench's own (-js, its store in
the bench directory), a file-storage work-queue stream, --producers
connections each keeping --window async publishes awaiting their PubAck,
and --consumers connections sharing one durable pull consumer, each
pulling --consumer-window messages ahead and acking each one. JetStream's
file store fsyncs on a timer (sync_interval, 2 minutes by default), not
per message as sync full does. Figures under "nats" in the JSON, and
publish_ratio_to_nats, consume_ratio_to_nats: Petrel's rates over NATS's.

--runs N measures N rounds, one after the other, each with its own
baselines, its own node and, with --against-nats, its own nats-server. The
rates, latencies, baselines and ratios printed are the medians of the
rounds (each ratio the median of the rounds' ratios), NATS's too, and
"rounds" in the JSON holds each round's.

PETREL_CPUPROFILE=prefix writes CPU profiles: the clients of this process
to prefix.clients.pprof (publish and consume), the node to
prefix.node.pprof (from its ready line to its stop).

The node's configuration, data and stderr live in a temporary directory,
removed at the end; the node is stopped before the bench returns, also on
failure or SIGINT.`,
		Example: `  petrel bench client
  petrel bench client --producers 1 --consumers 1 --messages 200000 --size 128 --json
  petrel bench client --concurrent --producers 4 --consumers 2
  petrel bench client --against-nats
  petrel bench client --against-nats --runs 3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunClient(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Producers, "producers", 1, "producing clients, each its own connection")
	f.IntVar(&o.Consumers, "consumers", 1, "consuming clients, each its own connection")
	f.IntVar(&o.Messages, "messages", 200000, "messages to publish and consume")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes`")
	f.IntVar(&o.Window, "window", 0, "publishes in flight per producer, and the node's link.window (0: the defaults, petrel.DefaultClientWindow)")
	f.Int64Var(&o.WindowBytes, "window-bytes", 0, "bytes of publishes in flight per producer (0: petrel.DefaultClientWindowBytes)")
	f.IntVar(&o.ConsumerWindow, "consumer-window", 1000, "deliveries pushed ahead per consumer")
	f.IntVar(&o.BaselineMessages, "baseline-messages", bench.DefaultBaselineMessages, "messages of the local baseline, at most --messages (0: no local baseline)")
	f.StringVar(&o.Sync, "sync", "full", "the node's store sync mode: full or normal")
	f.BoolVar(&o.Concurrent, "concurrent", false, "consume while publishing, instead of after")
	f.BoolVar(&o.AgainstNATS, "against-nats", false, "measure NATS JetStream (file storage) with the same workload too, as the baseline")
	f.StringVar(&o.NATS, "nats", "", "nats-server `binary` (default: on PATH, else "+bench.DefaultNATS+")")
	f.IntVar(&o.Runs, "runs", 1, "rounds, each with its own baselines, node and nats-server; the figures are the medians")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}
