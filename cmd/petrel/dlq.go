package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, replay or purge the dead letters of an address",
		Long: `Work on the dead letters of an address of a running node: the messages that
were delivered max_deliveries times without an ack (or that could not be
decoded) and were moved to its dead-letter queue, <address>.dlq unless the
address's dead_letter says otherwise.

  list    show them, consuming nothing
  replay  move them back where they were going, to be delivered afresh
  purge   delete them`,
	}
	parentCommand(cmd)
	cmd.AddCommand(newDLQListCmd(), newDLQReplayCmd(), newDLQPurgeCmd())
	return cmd
}

func newDLQListCmd() *cobra.Command {
	var node nodeFlags
	var limit int
	cmd := &cobra.Command{
		Use:   "list <address> [flags]",
		Short: "List the dead letters of an address without consuming them",
		Long: `List the dead letters of an address, in the order they would be delivered:
each with its id, priority, timestamp, the attempt its next delivery would
be, whether a consumer holds it now, and the reason it was dead-lettered.
` + nodeTargetHelp,
		Example: `  petrel dlq list orders
  petrel dlq list orders --limit 10 --json`,
		Args: oneAddress("address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageErrorf("--limit %d: want a count, 0 for all", limit)
			}
			var resp adminapi.DeadLettersResponse
			path := adminapi.DeadLettersPath(args[0], "") + "?" + adminapi.ParamLimit + "=" + strconv.Itoa(limit)
			if err := node.call(cmd.Context(), callTimeout, "GET", path, nil, &resp); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if node.asJSON {
				return writeJSONLine(out, resp)
			}
			if len(resp.Messages) == 0 {
				_, err := fmt.Fprintf(out, "no dead letters of %s\n", args[0])
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPRIORITY\tTIMESTAMP\tATTEMPT\tIN FLIGHT\tREASON")
			for _, m := range resp.Messages {
				ts, reason := m.Timestamp.Format(time.RFC3339), m.Reason
				if m.DecodeError != "" {
					ts, reason = "-", "undecodable: "+m.DecodeError
				}
				fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\n", m.ID, m.Priority, ts, m.Attempt, yesNo(m.InFlight), reason)
			}
			return tw.Flush()
		},
	}
	node.add(cmd, `print {"queue": ..., "messages": [...]} with the messages in full`)
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most `n` dead letters (default 0: all)")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newDLQReplayCmd() *cobra.Command {
	var node nodeFlags
	var count int
	cmd := &cobra.Command{
		Use:   "replay <address> [flags]",
		Short: "Move dead letters back where they were going",
		Long: `Move up to --count dead letters of an address (all by default) back where
they were going: each to the queue its destination routes to now, as a new
send would, where it is delivered afresh (attempt 1, no reason). The moves
happen in one transaction on the node: a crash loses or duplicates none.
Dead letters a consumer holds stay.
` + nodeTargetHelp,
		Example: `  petrel dlq replay orders
  petrel dlq replay orders --count 1`,
		Args: oneAddress("address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return usageErrorf("--count %d: want a count, 0 for all", count)
			}
			var resp adminapi.CountResponse
			if err := node.call(cmd.Context(), callTimeout, "POST", adminapi.DeadLettersPath(args[0], "replay"), adminapi.ReplayRequest{Count: count}, &resp); err != nil {
				return err
			}
			if node.asJSON {
				return writeJSONLine(cmd.OutOrStdout(), resp)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "replayed %d dead letters of %s\n", resp.Count, args[0])
			return err
		},
	}
	node.add(cmd, `print {"queue": ..., "count": ...}`)
	cmd.Flags().IntVar(&count, "count", 0, "replay at most `n` dead letters (default 0: all)")
	return cmd
}

func newDLQPurgeCmd() *cobra.Command {
	var node nodeFlags
	cmd := &cobra.Command{
		Use:   "purge <address> [flags]",
		Short: "Delete the dead letters of an address",
		Long: `Delete the dead letters of an address, except those a consumer holds, and
print how many were deleted. There is no undo.
` + nodeTargetHelp,
		Example: `  petrel dlq purge orders`,
		Args:    oneAddress("address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp adminapi.CountResponse
			if err := node.call(cmd.Context(), callTimeout, "POST", adminapi.DeadLettersPath(args[0], "purge"), nil, &resp); err != nil {
				return err
			}
			if node.asJSON {
				return writeJSONLine(cmd.OutOrStdout(), resp)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "purged %d dead letters of %s\n", resp.Count, args[0])
			return err
		},
	}
	node.add(cmd, `print {"queue": ..., "count": ...}`)
	return cmd
}
