package main

import (
	"fmt"
	"text/tabwriter"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

func newQueuesCmd() *cobra.Command {
	var node nodeFlags
	cmd := &cobra.Command{
		Use:   "queues [flags]",
		Short: "List the queues of a running node with their figures",
		Long: `List every queue of a running node: receive queues (one per local address),
their dead-letter queues (<address>.dlq) and send queues (address@node, one
per remote address), each with its kind, depth (stored messages, those in
flight included), messages in flight, totals enqueued, acked, dead-lettered
and expired, and bytes stored.
` + nodeTargetHelp,
		Example: `  petrel queues
  petrel queues --server 127.0.0.1:9090 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var qs []petrel.QueueStats
			if err := node.call(cmd.Context(), callTimeout, "GET", adminapi.PathQueues, nil, &qs); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if node.asJSON {
				return writeJSONLine(out, qs)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tDEPTH\tIN FLIGHT\tENQUEUED\tACKED\tDEAD-LETTERED\tEXPIRED\tBYTES")
			for _, q := range qs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", q.Name, q.Kind, q.Depth, q.InFlight, q.Enqueued, q.Acked, q.DeadLettered, q.Expired, q.Bytes)
			}
			return tw.Flush()
		},
	}
	node.add(cmd, "print the queues as one JSON array")
	return cmd
}

func newPurgeCmd() *cobra.Command {
	var node nodeFlags
	cmd := &cobra.Command{
		Use:   "purge <queue> [flags]",
		Short: "Delete every message of a queue that is not in flight",
		Long: `Delete every message of a queue of a running node, in one transaction, and
print how many were deleted. The queue is named as petrel queues shows it:
an address (orders), a dead-letter queue (orders.dlq) or a send queue
(orders@plant-7). Messages in flight stay for their consumers to settle.
There is no undo.
` + nodeTargetHelp,
		Example: `  petrel purge orders
  petrel purge orders@plant-7 --json`,
		Args: oneAddress("queue"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp adminapi.CountResponse
			if err := node.call(cmd.Context(), callTimeout, "POST", adminapi.QueuePurgePath(args[0]), nil, &resp); err != nil {
				return err
			}
			if node.asJSON {
				return writeJSONLine(cmd.OutOrStdout(), resp)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "purged %d messages of %s\n", resp.Count, resp.Queue)
			return err
		},
	}
	node.add(cmd, `print {"queue": ..., "count": ...}`)
	return cmd
}
