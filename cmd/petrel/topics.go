package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

func newTopicsCmd() *cobra.Command {
	var node nodeFlags
	cmd := &cobra.Command{
		Use:   "topics [flags]",
		Short: "List the topic spaces and subscriptions of a running node",
		Long: `List the topic spaces a running node declares (an address name a space's
pattern matches is a topic), then its subscriptions: name, pattern, whether
it is durable, its queue (sub:<name>, which petrel queues, purge and dlq
take), its consumers, its depth, its bound (the space's
max_queued_messages; - for none), the copies dropped at that bound
since the subscription was made, and its owner: the identity of the remote
or MQTT client that made it, which alone may join it (- for the node's
own). Then, for each neighbour whose interest
the node forwards publishes for, what waits toward it: its send queue,
its depth, its bound (topic_forward_max_queued; - for none) and the
publishes dropped at that bound.
` + nodeTargetHelp,
		Example: `  petrel topics
  petrel topics --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp adminapi.Topics
			if err := node.call(cmd.Context(), callTimeout, "GET", adminapi.PathTopics, nil, &resp); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if node.asJSON {
				// Every key --help promises, even from a node that
				// leaves an empty list out.
				if resp.Forwards == nil {
					resp.Forwards = []adminapi.Forward{}
				}
				return writeJSONLine(out, resp)
			}
			spaces := "none"
			if len(resp.Spaces) > 0 {
				spaces = strings.Join(resp.Spaces, ", ")
			}
			fmt.Fprintf(out, "topic spaces: %s\n", spaces)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SUBSCRIPTION\tPATTERN\tDURABLE\tQUEUE\tCONSUMERS\tDEPTH\tMAX\tDROPPED\tOWNER")
			for _, s := range resp.Subscriptions {
				owner := s.Owner
				if owner == "" {
					owner = "-" // the node's own
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%s\t%d\t%s\n", s.Name, s.Pattern, s.Durable, s.Queue, s.Consumers, s.Depth, bound(s.MaxQueued), s.Overflowed, owner)
			}
			if err := tw.Flush(); err != nil || len(resp.Forwards) == 0 {
				return err
			}
			fmt.Fprintln(out)
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOWARD\tQUEUE\tDEPTH\tMAX\tDROPPED")
			for _, f := range resp.Forwards {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", f.Neighbour, f.Queue, f.Depth, bound(f.MaxQueued), f.Overflowed)
			}
			return tw.Flush()
		},
	}
	node.add(cmd, `print {"spaces": [...], "subscriptions": [...], "forwards": [...]} as one JSON line`)
	return cmd
}

func newUnsubscribeCmd() *cobra.Command {
	var node nodeFlags
	cmd := &cobra.Command{
		Use:   "unsubscribe <subscription> [flags]",
		Short: "Delete a durable subscription of a running node, and what it holds",
		Long: `Delete a durable subscription of a running node, whoever made it (an
application, a remote client, the MQTT listener's persistent session), with
the messages it holds, and print how many those were. The subscription is
named as petrel topics lists it. Its consumers' receives then fail, and
its interest is withdrawn from the neighbours. This is how the operator
removes the durable subscriptions of a remote client, which has no way to
delete its own, when its identity reaches max_subscriptions_per_identity.
There is no undo.
` + nodeTargetHelp,
		Example: `  petrel unsubscribe billing
  petrel unsubscribe billing --json`,
		Args: oneAddress("subscription"),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Its queue's name, as petrel queues shows it, names it too.
			name := strings.TrimPrefix(args[0], "sub:")
			var resp adminapi.CountResponse
			if err := node.call(cmd.Context(), callTimeout, "POST", adminapi.UnsubscribePath(name), nil, &resp); err != nil {
				return err
			}
			if node.asJSON {
				return writeJSONLine(cmd.OutOrStdout(), resp)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted subscription %s and the %d messages it held\n", name, resp.Count)
			return err
		},
	}
	node.add(cmd, `print {"queue": "sub:<name>", "count": ...}`)
	return cmd
}
