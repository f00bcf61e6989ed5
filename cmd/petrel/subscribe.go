package main

import (
	"strings"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
	"github.com/spf13/cobra"
)

// subscribeOptions are the flags of petrel subscribe.
type subscribeOptions struct {
	recv    recvOptions // node, count, wait and the printing
	durable string
}

func newSubscribeCmd() *cobra.Command {
	var o subscribeOptions
	cmd := &cobra.Command{
		Use:   "subscribe <pattern> [flags]",
		Short: "Take messages published to topics from a running node",
		Long: `Take up to --count messages published to the topics a pattern matches
('*' is one word, '#' zero or more, as in orders.# or orders.*.created) and
print each as petrel recv does: header, kind properties, application
properties and body, or with --json one JSON object per message, per line.

With --durable NAME, subscribe makes or joins the durable subscription NAME
of the pattern on the node. It outlives the command: it keeps what is
published meanwhile, and the next petrel subscribe --durable NAME (or a
consumer of sub:NAME) takes it. The messages printed are acked, once they
are printed: a subscribe killed before then loses none. petrel topics
lists the subscriptions; delete one in the Go API (Node.Unsubscribe).

Without --durable, subscribe makes a temporary subscription that lasts for
the command only: it sees only what is published while it waits, so it
needs --wait. It ends when the command returns, with what it held.
` + nodeTargetHelp,
		Example: `  petrel subscribe 'orders.#' --wait 30s --count 10
  petrel subscribe 'orders.*.created' --durable audit --count 100
  petrel subscribe 'orders.#' --durable audit --wait 5s --json`,
		Args: onePattern,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := o.request(args[0])
			if err != nil {
				return err
			}
			return o.recv.take(cmd, adminapi.PathSubscribe, args[0], func(count int, wait time.Duration) any {
				req.Count, req.Wait = count, wait
				return req
			})
		},
	}
	o.recv.node.add(cmd, "print one JSON object per message, one per line")
	f := cmd.Flags()
	f.StringVar(&o.durable, "durable", "", "make or join the durable subscription `name`, which outlives the command")
	f.IntVar(&o.recv.count, "count", 1, "take up to `n` messages, at most 1000")
	f.DurationVar(&o.recv.wait, "wait", 0, "wait up to `duration` for the messages (default 0: only those ready now; required without --durable)")
	return cmd
}

func (o *subscribeOptions) request(pattern string) (adminapi.SubscribeRequest, error) {
	req := adminapi.SubscribeRequest{Pattern: pattern, Name: o.durable, Count: o.recv.count, Wait: o.recv.wait}
	o.recv.settle = adminapi.SettleAck
	if o.durable != "" {
		// The subscription outlives the command: the node holds what
		// it answers until it is printed (see petrel recv).
		req.Settle = adminapi.SettleLater
	}
	switch {
	case o.recv.count < 1 || o.recv.count > 1000:
		return req, usageErrorf("--count %d: want 1 to 1000", o.recv.count)
	case o.recv.wait < 0:
		return req, usageErrorf("--wait %v: negative", o.recv.wait)
	case o.durable == "" && o.recv.wait == 0:
		return req, usageErrorf("without --durable the subscription lasts for the command and sees only what is published while it waits: give --wait, such as --wait 10s")
	case o.durable != "":
		if err := message.ValidName(o.durable); err != nil {
			return req, usageErrorf("--durable %q: %v", o.durable, err)
		}
		// sub:<x>.dlq is subscription x's dead-letter queue. The node
		// refuses the name too; checked here, it is a usage error, as a
		// malformed name is.
		if base, dlq := strings.CutSuffix(o.durable, ".dlq"); dlq {
			return req, usageErrorf("--durable %q: its queue would be the dead-letter queue of subscription %q; use another name", o.durable, base)
		}
	}
	return req, nil
}

// onePattern checks the one argument of subscribe: a topic pattern.
func onePattern(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf("%q wants one topic pattern, got %d arguments", c.CommandPath(), len(args))
	}
	if _, err := address.ParsePattern(args[0]); err != nil {
		return usageErrorf("pattern %q: %v", args[0], err)
	}
	return nil
}
