package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

func newStatCmd() *cobra.Command {
	var server, cfgPath, dataDir, tokenFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat [-c file | --data-dir dir | --server host:port]",
		Short: "Show a running node's links, queues, file transfers and receiver counters",
		Long: `Show the state of a running node: each link (one per send queue) with its
state, last error, packets in flight, totals sent and acked, and send-queue
depth; each queue's figures; the files being received, and those paused
with why (spool full, link down); the receiver's counters.

petrel stat reads the node through the admin socket (petrel.sock) in the
node's data directory, so it needs the same data directory: give the node's
configuration file with -c, or the directory with --data-dir. With neither,
it uses the default data directory, petrel-data. With --server host:port it
reads a node's admin listener (admin.listen) over TCP instead, with the
bearer token of --token-file or $PETREL_ADMIN_TOKEN if it asks for one.`,
		Example: `  petrel stat -c /etc/petrel/petrel.yaml
  petrel stat --data-dir /var/lib/petrel --json
  petrel stat --server 127.0.0.1:9090`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := readNodeStatus(cmd.Context(), server, cfgPath, dataDir, tokenFile)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the node's data `directory`")
	cmd.Flags().StringVar(&server, "server", "", "the node's admin `address` (host:port or http://host:port)")
	addTokenFlag(cmd, &tokenFile)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	return cmd
}

// readNodeStatus reads the status of the running node at the admin
// address server, or else of the one whose data directory is dataDir, or
// that of the configuration file cfgPath, or the default.
func readNodeStatus(ctx context.Context, server, cfgPath, dataDir, tokenFile string) (petrel.Status, error) {
	// newAdminClient refuses more than one with a usage error (exit 2).
	c, err := newAdminClient(server, cfgPath, dataDir, tokenFile, os.Stderr)
	if err != nil {
		return petrel.Status{}, err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var st petrel.Status
	err = c.do(ctx, "GET", adminapi.PathStatus, nil, &st)
	return st, err
}

func printStatus(w io.Writer, st petrel.Status) {
	fmt.Fprintf(w, "node %s  id %s  up %s\n", st.Node, st.ID, time.Since(st.Started).Round(time.Second))
	if st.Listen != "" {
		fmt.Fprintf(w, "listening on %s\n", st.Listen)
	}
	if st.HA != nil {
		fmt.Fprintf(w, "ha role %s since %s (%s ago), lock %s\n", st.HA.Role, st.HA.Since.Format(time.RFC3339),
			time.Since(st.HA.Since).Round(time.Second), st.HA.Lock)
	}
	src := st.Config.Source
	if src == "" {
		src = "(defaults)"
	}
	fmt.Fprintf(w, "configuration %s, version %d, loaded %s\n", src, st.Config.Version, st.Config.LoadedAt.Format(time.RFC3339))
	if st.Config.LastError != "" {
		fmt.Fprintf(w, "  last reload refused: %s\n", st.Config.LastError)
	}
	if len(st.Config.NeedsRestart) > 0 {
		fmt.Fprintf(w, "  changed, needs a restart: %s\n", strings.Join(st.Config.NeedsRestart, ", "))
	}
	fmt.Fprintln(w, "\nlinks")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  QUEUE\tHOP\tSTATE\tIN FLIGHT\tSENT\tACKED\tREFUSED\tRECONNECTS\tDEPTH\tLAST ERROR")
	for _, l := range st.Links {
		state := string(l.State)
		if l.Stalled {
			state += " (stalled)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", l.Queue, l.NextHop, state, l.InFlight, l.Sent, l.Acked, l.Refused, l.Reconnects, l.Depth, l.LastError)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nqueues")
	fmt.Fprintln(tw, "  NAME\tKIND\tDEPTH\tIN FLIGHT\tENQUEUED\tACKED\tEXPIRED\tDEDUPED\tDEAD-LETTERED\tDEDUPE ENTRIES")
	for _, q := range st.Queues {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", q.Name, q.Kind, q.Depth, q.InFlight, q.Enqueued, q.Acked, q.Expired, q.Deduped, q.DeadLettered, q.DedupeEntries)
	}
	tw.Flush()
	printTopicsStatus(w, st.Topics)
	if d := st.Discovery; d.Enabled {
		fmt.Fprintf(w, "\ndiscovery  sent %d  received %d  accepted %d  malformed %d  bad mac %d  own %d  unusable %d  stale %d  nodes known %d\n",
			d.Sent, d.Received, d.Accepted, d.Malformed, d.BadMAC, d.Own, d.Unusable, d.Stale, len(st.Nodes))
	}
	printTransfers(w, st.Transfers)
	printOutboxes(w, st.Outboxes)
	r := st.Receiver
	fmt.Fprintf(w, "\nreceiver  connections %d  handshake failures %d (auth %d, tls %d)  sessions refused %d\n", r.Connections, r.HandshakeFailed, r.AuthFailed, r.TLSFailed, r.SessionsRefused)
	fmt.Fprintf(w, "          received %d  stored %d  deduped %d  refused %d (forged origins %d, routing loops %d)  protocol errors %d  ended by a full store %d\n",
		r.Received, r.Stored, r.Deduped, r.Refused, r.ForgedOrigins, r.RoutingLoops, r.ProtocolErrors, r.StoreFull)
	if a := st.Access; a.Rules > 0 {
		fmt.Fprintf(w, "\naccess    rules %d  denied: send %d  consume %d  relay %d  publish %d  subscribe %d\n", a.Rules,
			a.Denied[petrel.ActionSend], a.Denied[petrel.ActionConsume], a.Denied[petrel.ActionRelay],
			a.Denied[petrel.ActionPublish], a.Denied[petrel.ActionSubscribe])
	}
	if m := st.MQTT; m != nil {
		printMQTT(w, m)
	}
}

// printTransfers lists the files being received and those paused (a
// full spool, a cut link), with why; nothing when there are none.
func printTransfers(w io.Writer, ts []petrel.TransferStatus) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfile transfers")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FILE\tFROM\tDESTINATION\tSTATE\tDURABLE\tSIZE\tSINCE\tWHY")
	for _, t := range ts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.Filename, t.From, t.Dest, t.State, t.Offset, t.Size,
			t.Since.Format(time.RFC3339), t.Error)
	}
	tw.Flush()
}

// printMQTT shows the MQTT listener: its clients, sessions and traffic.
func printMQTT(w io.Writer, m *petrel.MQTTStats) {
	fmt.Fprintf(w, "\nmqtt      %s  clients %d  sessions %d (persistent %d)  subscriptions %d  in flight %d  retained %d\n",
		m.Listen, m.Clients, m.Sessions, m.Persistent, m.Subscriptions, m.Inflight, m.Retained)
	fmt.Fprintf(w, "          published qos0 %d  qos1 %d  qos2 %d  refused %d  delivered qos0 %d  qos1 %d  qos2 %d  acked %d  auth failures %d\n",
		m.Published[0], m.Published[1], m.Published[2], m.Refused, m.Delivered[0], m.Delivered[1], m.Delivered[2], m.Acked, m.AuthFailed)
	if m.WebSocket != "" {
		fmt.Fprintf(w, "          websocket %s\n", m.WebSocket)
	}
	if m.AcceptErrors > 0 || m.WebSocketAcceptErrors > 0 {
		fmt.Fprintf(w, "          accept errors retried: tcp %d  websocket %d\n", m.AcceptErrors, m.WebSocketAcceptErrors)
	}
	if m.ListenerError != "" {
		fmt.Fprintf(w, "          NOT READY: %s\n", m.ListenerError)
	}
	fmt.Fprintf(w, "          shared groups %d  wills delayed %d  sent %d  discarded %d  qos2 awaiting pubrel %d  to resend %d  pubrels resent %d\n",
		m.SharedGroups, m.WillsDelayed, m.WillsSent, m.WillsDiscarded, m.QoS2Pending, m.ResendNoted, m.ResentReleases)
	if len(m.List) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLIENT\tUSER\tCONNECTED\tPERSISTENT\tMQTT\tIN FLIGHT\tFILTERS")
	for _, s := range m.List {
		v := "3.1.1"
		if s.Version == 5 {
			v = "5"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%v\t%s\t%d\t%s\n", s.ClientID, s.Username, s.Connected, s.Persistent, v, s.Inflight, strings.Join(s.Subscriptions, " "))
	}
	tw.Flush()
}

// bound prints a subscription's bound (max_queued_messages), - for none.
func bound(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// printTopicsStatus prints the topic spaces, with their keep policies,
// and the subscriptions, with pattern, depth and consumers; nothing for a
// node without topics.
func printTopicsStatus(w io.Writer, t petrel.TopicsStatus) {
	if len(t.Spaces) == 0 && len(t.Subscriptions) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntopics  published %d  unrouted %d  forwarded %d  pruned %d  kept %d (dropped %d)  interest learned %d\n",
		t.Published, t.Unrouted, t.Forwarded, t.Pruned, t.Kept, t.KeepDropped, t.Interest)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SPACE\tKEEP\tHELD\tBOUND")
	for _, s := range t.Spaces {
		keep := "-"
		if s.Keep.Messages > 0 {
			keep = fmt.Sprintf("%d messages", s.Keep.Messages)
			if s.Keep.Age > 0 {
				keep += ", " + s.Keep.Age.String()
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", s.Pattern, keep, s.Held, bound(s.MaxQueued))
	}
	tw.Flush()
	fmt.Fprintln(tw, "  SUBSCRIPTION\tPATTERN\tDURABLE\tCONSUMERS\tDEPTH\tBOUND\tDROPPED")
	for _, s := range t.Subscriptions {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\t%d\t%s\t%d\n", s.Name, s.Pattern, s.Durable, s.Consumers, s.Depth, bound(s.MaxQueued), s.Overflowed)
	}
	tw.Flush()
}

// printOutboxes lists the outbox folders, saying of one removed that its
// files wait until it is back.
func printOutboxes(w io.Writer, obs []petrel.OutboxStatus) {
	if len(obs) == 0 {
		return
	}
	fmt.Fprintln(w, "\noutboxes")
	for _, o := range obs {
		state := "watched"
		if !o.Watching {
			state = "FOLDER GONE: nothing is sent from it until it is back under this path"
		}
		fmt.Fprintf(w, "  %s -> %s  %s\n", o.Dir, o.To, state)
	}
}
