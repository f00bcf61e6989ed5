package main

import (
	"context"
	"io"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchFanoutCmd() *cobra.Command {
	var o bench.FanoutOptions
	cmd := &cobra.Command{
		Use:   "fanout",
		Short: "One publisher to a topic with N subscriptions, beside an anycast baseline",
		Long: `Measure fan-out on one embedded node: --producers goroutines publish
--messages messages of --size bytes to the topic ` + bench.FanoutTopic + ` with SendAsync, each
keeping --window sends in flight, while --subscribers subscriptions to
` + bench.FanoutSpace + ` (durable with --durable) are each drained by one consumer.
First, in the same run and on the same node, the same producers send the
same messages to one anycast address drained by one consumer: the baseline.
Every consumer, the baseline's too, takes up to --batch messages per
ReceiveBatch and acks each.

Figures:
  publish_msgs_per_sec           messages / (first submitted -> last publish
                                 durable with all its copies)
  delivered_msgs_per_sec         copies acked by all the subscriptions /
                                 (first submitted -> last copy acked)
  p50_ms, p99_ms                 publish -> delivery, submit -> Receive, over
                                 every copy, counted in buckets 1/128 wide
                                 (within 0.4%; max_ms is exact)
  baseline_anycast_msgs_per_sec  the same producers to one anycast address
  publish_ratio, delivered_ratio the two rates over the baseline
  peak_rss_mb                    peak resident set size of the process (VmHWM)

With --nodes 3 the bench runs three node processes in a line, n1 - n2 - n3,
and spreads the subscriptions over them (subscription i on node i mod 3):
the publisher is at n1, n2 relays to n3 what n3's subscriptions want, and
the baseline is the same publisher to one anycast address of n1. The
latencies are then the worst node's (per_node has each node's), and
peak_rss_mb the largest node's; per_node also holds each node's peak RSS.

With --runs N (one node) the bench measures N rounds on the same node and
subscriptions, each a baseline and a fan-out, the baseline first in odd
rounds and second in even ones, so that neither always runs on a warmer
node. The rates and the ratios are then the medians of the rounds' (each
ratio the median of the rounds' ratios), rounds holds each round's, and
the latencies are over every round's copies.`,
		Example: `  petrel bench fanout
  petrel bench fanout --subscribers 8 --durable --messages 50000 --size 128 --json
  petrel bench fanout --subscribers 8 --durable --messages 50000 --runs 5
  petrel bench fanout --nodes 3 --subscribers 8 --durable --messages 50000 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunFanout(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Subscribers, "subscribers", 8, "subscriptions to the topic, one consumer each")
	f.IntVar(&o.Nodes, "nodes", 1, "nodes: 1 (embedded), or 3 node processes in a line")
	f.BoolVar(&o.Durable, "durable", false, "make the subscriptions durable")
	f.IntVar(&o.Messages, "messages", 50000, "messages to publish")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes`")
	f.IntVar(&o.Producers, "producers", 64, "producer goroutines")
	f.IntVar(&o.Batch, "batch", 64, "messages each consumer, the baseline's too, takes per ReceiveBatch (1: one a call)")
	f.IntVar(&o.Window, "window", 1024, "sends in flight per producer")
	f.StringVar(&o.Sync, "sync", "full", "store sync mode: full or normal")
	f.IntVar(&o.Runs, "runs", 1, "rounds on one node, each a baseline and a fan-out in turns; the figures are the medians")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}
