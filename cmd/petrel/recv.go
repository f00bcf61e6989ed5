package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

// recvOptions are the flags of petrel recv.
type recvOptions struct {
	node        nodeFlags
	count       int
	wait        time.Duration
	noAck, nack bool
	reason      string
}

func newRecvCmd() *cobra.Command {
	var o recvOptions
	cmd := &cobra.Command{
		Use:   "recv <address> [flags]",
		Short: "Take messages from a receive address of a running node",
		Long: `Take up to --count messages from a receive address (or a dead-letter queue)
of a running node and print each: its header (id, origin, destination, kind,
priority, timestamp, remaining ttl, delivery attempt), its kind properties,
its application properties and its body, as text if it is UTF-8, else as
base64. With --wait it waits that long for the messages; without, it takes
only those ready now. No message is not an error: recv prints nothing on
standard output and says so on standard error.

The messages are acked once they are printed: they are gone from the node
when recv returns. With --no-ack they are released instead, and delivered
again at once; with --nack they are nacked, with --reason, and delivered
again after the address's backoff, or moved to its dead-letter queue past
its max_deliveries.

With --json recv prints one JSON object per message, one per line (JSON
lines): the fields of the admin API's message (id, origin, destination,
kind, priority, timestamp, ttl in nanoseconds, attempt, reason, command or
data, properties as key/type/value, body as base64 and text when UTF-8).
` + nodeTargetHelp,
		Example: `  petrel recv orders
  petrel recv orders --count 10 --wait 5s --json
  petrel recv orders --no-ack
  petrel recv jobs --nack --reason "no handler yet"`,
		Args: oneAddress("address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := o.request(args[0])
			if err != nil {
				return err
			}
			var resp adminapi.RecvResponse
			if err := o.node.call(cmd.Context(), o.wait+callTimeout, "POST", adminapi.PathRecv, req, &resp); err != nil {
				return err
			}
			if err := o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], resp.Messages); err != nil {
				return err
			}
			if resp.Error != "" {
				return errors.New(resp.Error)
			}
			return nil
		},
	}
	o.node.add(cmd, "print one JSON object per message, one per line")
	f := cmd.Flags()
	f.IntVar(&o.count, "count", 1, "take up to `n` messages, at most 1000")
	f.DurationVar(&o.wait, "wait", 0, "wait up to `duration` for the messages (default 0: only those ready now)")
	f.BoolVar(&o.noAck, "no-ack", false, "release the messages instead of acking them: they are delivered again at once")
	f.BoolVar(&o.nack, "nack", false, "nack the messages: redelivered after a backoff, or dead-lettered past max_deliveries")
	f.StringVar(&o.reason, "reason", "", "the nack's `reason` (with --nack)")
	return cmd
}

func (o *recvOptions) request(addr string) (adminapi.RecvRequest, error) {
	req := adminapi.RecvRequest{Address: addr, Count: o.count, Wait: o.wait, Settle: adminapi.SettleAck, Reason: o.reason}
	switch {
	case o.count < 1 || o.count > 1000:
		return req, usageErrorf("--count %d: want 1 to 1000", o.count)
	case o.wait < 0:
		return req, usageErrorf("--wait %v: negative", o.wait)
	case o.noAck && o.nack:
		return req, usageErrorf("give --no-ack or --nack, not both")
	case o.reason != "" && !o.nack:
		return req, usageErrorf("--reason goes with --nack")
	case o.noAck:
		req.Settle = adminapi.SettleRelease
	case o.nack:
		req.Settle = adminapi.SettleNack
		if req.Reason == "" {
			req.Reason = "nacked with petrel recv"
		}
	}
	return req, nil
}

func (o *recvOptions) print(out, errOut io.Writer, addr string, msgs []adminapi.Message) error {
	if len(msgs) == 0 && !o.node.asJSON {
		fmt.Fprintf(errOut, "no message on %s\n", addr)
	}
	for i, m := range msgs {
		if o.node.asJSON {
			if err := writeJSONLine(out, m); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		printMessage(out, m)
	}
	return nil
}

// printMessage writes m as "field: value" lines, then its body.
func printMessage(w io.Writer, m adminapi.Message) {
	field := func(name string, v any) { fmt.Fprintf(w, "%-16s %v\n", name+":", v) }
	field("id", m.ID)
	field("origin", m.Origin)
	field("destination", m.Destination)
	field("kind", m.Kind)
	field("priority", m.Priority)
	field("timestamp", m.Timestamp.Format(time.RFC3339Nano))
	if m.TTL > 0 {
		field("ttl", m.TTL.Round(time.Millisecond))
	}
	if m.Attempt > 0 {
		field("attempt", m.Attempt)
	}
	if m.Reason != "" {
		field("reason", m.Reason)
	}
	printKindProps(field, m)
	for _, p := range m.Properties {
		field("property "+p.Key, p.Type+" "+p.Value)
	}
	if m.Text != nil {
		field("body", fmt.Sprintf("%d bytes, text", len(m.Body)))
		fmt.Fprintln(w, *m.Text)
		return
	}
	field("body", fmt.Sprintf("%d bytes, not UTF-8, as base64", len(m.Body)))
	fmt.Fprintln(w, base64.StdEncoding.EncodeToString(m.Body))
}

func printKindProps(field func(string, any), m adminapi.Message) {
	if c := m.Command; c != nil {
		field("command", c.Name)
		if c.ReplyTo != "" {
			field("reply-to", c.ReplyTo)
		}
		if c.CorrelationID != "" {
			field("correlation-id", c.CorrelationID)
		}
	}
	if d := m.Data; d != nil {
		if d.DataType != "" {
			field("data-type", d.DataType)
		}
		if d.Encoding != "" {
			field("encoding", d.Encoding)
		}
	}
	if f := m.File; f != nil {
		field("filename", f.Filename)
		field("filesize", f.Filesize)
		if f.Checksum != "" {
			field("sha256", f.Checksum)
		}
		if f.ReceivedPath != "" {
			field("received-path", f.ReceivedPath)
		}
	}
}
