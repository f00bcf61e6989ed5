package main

import (
	"context"
	"io"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

// `petrel bench agent` runs one node of a multi-process bench: `bench link`,
// `bench file` and the cross-process tests start agents as child processes
// and read what they print (see internal/bench, agent.go). It is hidden: it
// is a tool of those, not a command for users.

func newBenchAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "One node of a multi-process bench (used by bench link and the tests)",
		Hidden: true,
	}
	parentCommand(cmd)
	cmd.AddCommand(newAgentProduceCmd(), newAgentConsumeCmd(), newAgentSendFileCmd(), newAgentRecvFileCmd(), newAgentFanoutCmd())
	return cmd
}

// agentOpener opens the node the file at cfgPath describes. Logs go to
// stderr, as the file's log section says.
func agentOpener(cfgPath string, stderr io.Writer) bench.OpenFunc {
	return func(ctx context.Context) (*petrel.Node, error) {
		if cfgPath == "" {
			return nil, usageErrorf("an agent needs its node's configuration: -c file")
		}
		file, err := loadConfig(cfgPath)
		if err != nil {
			return nil, err
		}
		cfg := file.NodeConfig()
		cfg.Logger = file.NewLogger(stderr)
		cfg.ConfigSource = cfgPath
		cfg.Store.OnCommit = bench.WatchCommits(cfg.Store.OnCommit)
		return petrel.Open(ctx, cfg)
	}
}

func newAgentProduceCmd() *cobra.Command {
	var o bench.ProduceOptions
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "produce -c file --to addr@node",
		Short: "Open a node and send messages from it",
		Long: `Open the node of -c, print its ready line, and send --messages data
messages of --size bytes to --to, keeping --window sends in flight, paced at
--rate messages per second when given. Each carries the int64 property
sent_ns, its submit time. Then print {"event":"produced",...}; with
--wait-drained, wait until every send queue of the node is empty and print
{"event":"drained",...}. Then keep the node open until stdin closes or a
signal comes.

--to may name a topic, with --wait-interest (a count) or --wait-interest-of
(node names) to wait for the interest of its subscriptions on other nodes
first.

--keys-log names each message <key-prefix>-<priority>-<n>, starts its body
with that key and a space, and prints "attempt <key>" before it is submitted
and "ok <key>" once it is durable.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := agentOpener(cfgPath, cmd.ErrOrStderr())
			return benchError(bench.RunAgentProduce(cmd.Context(), open, o, cmd.InOrStdin(), cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.StringVar(&o.To, "to", "", "destination `address@node`")
	f.IntVar(&o.Messages, "messages", 1000, "messages to send")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes` (at least the key with --keys-log)")
	f.Float64Var(&o.Rate, "rate", 0, "messages per second (0: as fast as the window allows)")
	f.IntVar(&o.Window, "window", 1024, "sends in flight")
	f.IntVar(&o.Queues, "queues", 1, "spread the messages round robin over this many addresses at --to's node, <address>-<i>")
	f.StringVar(&o.Priorities, "priorities", "4", "a priority 0-9, or mixed to cycle 0..9")
	f.BoolVar(&o.KeysLog, "keys-log", false, "print attempt/ok lines with each message's key")
	f.StringVar(&o.KeyPrefix, "key-prefix", "k", "prefix of the keys of --keys-log")
	f.StringVar(&o.ThenUrgent, "then-urgent", "", "after the others, send one priority-9 message whose body starts with this `key`")
	f.BoolVar(&o.WaitDrained, "wait-drained", false, "after producing, wait until every send queue is empty")
	f.DurationVar(&o.WaitRoute, "wait-route", 0, "first wait up to this `long` for --to's node to be reachable (found by discovery)")
	f.StringVar(&o.Topic, "topic", "", "publish every --topic-every-th message to this `topic` instead (keys prefixed <key-prefix>t)")
	f.IntVar(&o.TopicEvery, "topic-every", 3, "with --topic, which messages go to it")
	f.IntVar(&o.FileEvery, "file-every", 0, "send every `n`-th message as a file message of --file-size bytes instead (keys prefixed <key-prefix>f)")
	f.IntVar(&o.FileSize, "file-size", 64<<10, "size in `bytes` of the files of --file-every")
	f.StringVar(&o.FileDir, "file-dir", "", "the `directory` the files of --file-every are written to, and stay in until sent")
	f.StringVar(&o.Subscribe, "subscribe", "", "make the durable subscription `name=pattern` at start")
	f.StringVar(&o.WaitInterestOf, "wait-interest-of", "", "before sending, wait for the topic interest of these `nodes` (comma-separated)")
	f.BoolVar(&o.DirectInterest, "direct-interest", false, "with --wait-interest-of, wait for each node's interest from that node itself, not only through a relay (a mesh)")
	f.IntVar(&o.WaitInterest, "wait-interest", 0, "first wait until the node learned this many pieces of topic interest from its neighbours")
	return cmd
}

func newAgentConsumeCmd() *cobra.Command {
	var o bench.ConsumeOptions
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "consume -c file --from addr",
		Short: "Open a node and consume messages on it",
		Long: `Open the node of -c, print its ready line, receive and ack --messages
messages of the local address --from, then print {"event":"consumed",...}
with the latency percentiles (now - sent_ns), and keep the node open until
stdin closes or a signal comes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := agentOpener(cfgPath, cmd.ErrOrStderr())
			return benchError(bench.RunAgentConsume(cmd.Context(), open, o, cmd.InOrStdin(), cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.StringVar(&o.From, "from", bench.Addr, "local `address` to consume")
	f.IntVar(&o.Messages, "messages", 1000, "messages to consume")
	f.IntVar(&o.Queues, "queues", 1, "consume from this many addresses, <from>-<i>, as produce --queues sends")
	f.StringVar(&o.UrgentKey, "urgent-key", "", "report when the message whose body starts with this `key` arrives")
	return cmd
}

func newAgentSendFileCmd() *cobra.Command {
	var o bench.SendFileOptions
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "sendfile -c file --to addr@node --file path",
		Short: "Open a node and send one file from it",
		Long: `Open the node of -c, print its ready line, send the file --file to --to
as a file message and print {"event":"sent",...} once Send returned; wait
until every send queue of the node is empty and print {"event":"handed",...}.
Then keep the node open until stdin closes or a signal comes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := agentOpener(cfgPath, cmd.ErrOrStderr())
			return benchError(bench.RunAgentSendFile(cmd.Context(), open, o, cmd.InOrStdin(), cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.StringVar(&o.To, "to", "", "destination `address@node`")
	f.StringVar(&o.File, "file", "", "the `path` of the file to send")
	f.StringVar(&o.SHA256, "sha256", "", "the file's SHA-256 in lowercase `hex`, if known: Send then does not read the file")
	return cmd
}

func newAgentRecvFileCmd() *cobra.Command {
	var o bench.RecvFileOptions
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "recvfile -c file --from addr",
		Short: "Open a node and receive one file on it",
		Long: `Open the node of -c, print its ready line, receive one file message from
the local address --from, ack it and print {"event":"received",...} with
the path of the file. Then keep the node open until stdin closes or a
signal comes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := agentOpener(cfgPath, cmd.ErrOrStderr())
			return benchError(bench.RunAgentRecvFile(cmd.Context(), open, o, cmd.InOrStdin(), cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.StringVar(&o.From, "from", bench.FileAddr, "local `address` to receive from")
	return cmd
}

func newAgentFanoutCmd() *cobra.Command {
	var o bench.FanoutAgentOptions
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "fanout -c file",
		Short: "Open a node, subscribe to the fan-out bench's topic, and publish to it",
		Long: `Open the node of -c, print its ready line, make --subscribers
subscriptions to ` + bench.FanoutSpace + ` (durable with --durable) and drain each
with its own consumer until it delivered --expect messages; then print
{"event":"fanout-consumed",...} with the latency percentiles (now - the
message's timestamp). With --publish N, first send N messages to the
anycast address ` + bench.Addr + ` with one consumer (the baseline), wait until the node
learned --wait-interest pieces of topic interest, publish N messages to
` + bench.FanoutTopic + ` and print {"event":"fanout-published",...}. Then keep the node
open until stdin closes or a signal comes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			open := agentOpener(cfgPath, cmd.ErrOrStderr())
			return benchError(bench.RunAgentFanout(cmd.Context(), open, o, cmd.InOrStdin(), cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.IntVar(&o.Subscribers, "subscribers", 0, "subscriptions on this node")
	f.IntVar(&o.Expect, "expect", 0, "messages each subscription delivers")
	f.IntVar(&o.Batch, "batch", 64, "messages a consumer takes per ReceiveBatch")
	f.BoolVar(&o.Durable, "durable", false, "make the subscriptions durable")
	f.IntVar(&o.Publish, "publish", 0, "messages to publish (0: this node does not publish)")
	f.IntVar(&o.Size, "size", 128, "body size in `bytes`")
	f.IntVar(&o.Producers, "producers", 64, "producer goroutines")
	f.IntVar(&o.Window, "window", 1024, "sends in flight per producer")
	f.IntVar(&o.WaitInterest, "wait-interest", 0, "before publishing, wait until the node learned this many pieces of topic interest")
	return cmd
}
