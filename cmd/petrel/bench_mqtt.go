package main

import (
	"context"
	"io"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchMQTTCmd() *cobra.Command {
	var o bench.MQTTOptions
	cmd := &cobra.Command{
		Use:   "mqtt",
		Short: "MQTT clients through a Petrel node or any MQTT broker, beside mosquitto",
		Long: `Measure an MQTT broker with paho clients on loopback: --subscribers clients
subscribe to ` + bench.MQTTTopicPrefix + `<run>/# at --qos, then --clients clients
publish --messages messages of --size bytes between them, each to its own
topic ` + bench.MQTTTopicPrefix + `<run>/<client>, keeping --inflight QoS 1 or 2
publishes unacknowledged; <run> is random, so that runs sharing a broker
keep apart. Every subscriber gets every message.

Without --broker, each round starts a Petrel node (petrel node, store sync
--sync) with its MQTT listener on loopback and measures it; with --broker
tcp://host:port it measures that broker, whichever it is.

--against-mosquitto also measures Eclipse Mosquitto in each round, the
same clients against a fresh broker with persistence on (persistence true,
a temporary persistence_location, listener on 127.0.0.1, allow_anonymous,
max_queued_messages 0 so that it queues rather than drops QoS 1 copies
for a subscriber that lags), and prints its figures beside the broker's,
with the ratios. Mosquitto writes its persistence file on a timer and at
exit, and acknowledges a publish without waiting for the disk.

Figures:
  publish_msgs_per_sec    messages / (first publish -> last PUBACK, or at
                          QoS 0 last publish written)
  delivered_msgs_per_sec  copies delivered to the subscribers / (first
                          publish -> last copy delivered)
  p50_ms, p99_ms, max_ms  publish -> delivery, over every copy
  delivered, duplicates,  distinct copies; copies delivered again; copies
  lost                    never delivered (QoS 0 only: at QoS 1 the round
                          waits for every copy)
  publish_ratio,          the broker's rates over mosquitto's in the same
  delivered_ratio         round, with --against-mosquitto

--subscribers 0 measures publishing alone: the ceiling of the clients and
the machine. A Petrel node then stores nothing (a topic publish that no
subscription matches is dropped and counted), so it is no test of its
store.

Each of --runs rounds measures both brokers, in turn; the figures are the
medians and "rounds" in the JSON lists every round.`,
		Example: `  petrel bench mqtt --against-mosquitto --qos 1 --clients 8 --size 128 --runs 3
  petrel bench mqtt --broker tcp://127.0.0.1:1883 --qos 0 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunMQTT(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Clients, "clients", 8, "publishing clients")
	f.IntVar(&o.QoS, "qos", 1, "QoS of the publishes and the subscriptions: 0, 1 or 2")
	f.IntVar(&o.Messages, "messages", 50000, "messages to publish, shared among the clients")
	f.IntVar(&o.Size, "size", 128, "payload size in `bytes` (at least 12: a send time and a number)")
	f.IntVar(&o.Subscribers, "subscribers", 1, "subscribing clients, each getting every message (0: publishing alone)")
	f.IntVar(&o.Inflight, "inflight", 64, "QoS 1 or 2 publishes unacknowledged per client")
	f.StringVar(&o.Broker, "broker", "", "measure the MQTT broker at this `URL` (tcp://host:port) instead of a Petrel node")
	f.BoolVar(&o.AgainstMosquitto, "against-mosquitto", false, "measure mosquitto (persistence on) in each round too, as the baseline")
	f.StringVar(&o.Mosquitto, "mosquitto", "", "mosquitto `binary` (default: on PATH, else "+bench.DefaultMosquitto+")")
	f.StringVar(&o.Sync, "sync", "full", "the Petrel node's store sync mode: full or normal")
	f.IntVar(&o.Runs, "runs", 1, "rounds; the figures are the medians")
	f.StringVar(&o.Dir, "dir", "", "make the bench directory in this `folder` (default: the system's temp folder)")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench directory (configurations, data, stderr of each broker)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}
