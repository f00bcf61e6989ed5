package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
	"github.com/spf13/cobra"
)

// sendOptions are the flags of petrel send.
type sendOptions struct {
	node                            nodeFlags
	kind                            string
	priority                        int
	ttl                             time.Duration
	props                           []string
	command, replyTo, correlationID string
	dataType, encoding              string
}

func newSendCmd() *cobra.Command {
	var o sendOptions
	cmd := &cobra.Command{
		Use:   "send <address[@node]> <body | @file | -> [flags]",
		Short: "Send a command or data message through a running node",
		Long: `Send one message through a running node. The body is the second argument as
text, the contents of a file with @file, or standard input with -. The
command returns once the node stored the message durably, and prints its id.

--kind is data (the default) or command; a command message needs --command
and may have --reply-to and --correlation-id, a data message may have
--data-type and --encoding. Application properties are --prop key=type:value,
repeated, where type is bool, byte, bytes (base64), int16, int32, int64,
float32, float64 or string. Files go with petrel sendfile.
` + nodeTargetHelp,
		Example: `  petrel send orders@plant-7 '{"sku":42}' --data-type order --encoding json
  petrel send control --kind command --command restart --reply-to replies --prop line=int16:3 -
  petrel send reports@hq @report.csv --ttl 1h --priority 7 --json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("%q wants <address[@node]> and a body (text, @file or -), got %d arguments", c.CommandPath(), len(args))
			}
			return oneAddress("address")(c, args[:1])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := o.request(args[0])
			if err != nil {
				return err
			}
			if req.Body, err = readBody(args[1], cmd.InOrStdin()); err != nil {
				return err
			}
			var sent adminapi.SendResponse
			if err := o.node.call(cmd.Context(), callTimeout, "POST", adminapi.PathSend, req, &sent); err != nil {
				return err
			}
			if o.node.asJSON {
				return writeJSONLine(cmd.OutOrStdout(), sent)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), sent.ID)
			return err
		},
	}
	o.node.add(cmd, "print the id and destination as one JSON object")
	f := cmd.Flags()
	f.StringVar(&o.kind, "kind", "data", "message `kind`: data or command")
	f.IntVar(&o.priority, "priority", message.DefaultPriority, "message priority, 0 to 9")
	f.DurationVar(&o.ttl, "ttl", 0, "time to live (`duration`, such as 30s or 1h); default: none")
	f.StringArrayVar(&o.props, "prop", nil, "application property `key=type:value`, repeatable")
	f.StringVar(&o.command, "command", "", "command `name` (command messages)")
	f.StringVar(&o.replyTo, "reply-to", "", "`address` for the reply (command messages)")
	f.StringVar(&o.correlationID, "correlation-id", "", "correlation `id` (command messages)")
	f.StringVar(&o.dataType, "data-type", "", "data `type` (data messages)")
	f.StringVar(&o.encoding, "encoding", "", "body `encoding`, such as json (data messages)")
	return cmd
}

// request checks the flags and makes the request for a message to to.
func (o *sendOptions) request(to string) (adminapi.SendRequest, error) {
	req := adminapi.SendRequest{To: to, TTL: o.ttl}
	if err := ttlFlag(o.ttl); err != nil {
		return req, err
	}
	kind, err := message.ParseKind(o.kind)
	if err != nil {
		return req, usageErrorf("--kind: %v", err)
	}
	req.Kind = kind.String()
	p, err := priorityFlag(o.priority)
	if err != nil {
		return req, err
	}
	req.Priority = &p
	commandSet := o.command != "" || o.replyTo != "" || o.correlationID != ""
	dataSet := o.dataType != "" || o.encoding != ""
	switch {
	case kind == message.KindFile:
		return req, usageErrorf("--kind file: send files with petrel sendfile")
	case kind == message.KindCommand && o.command == "":
		return req, usageErrorf("a command message needs --command NAME")
	case kind == message.KindCommand && dataSet:
		return req, usageErrorf("--data-type and --encoding are for data messages, and this is a command")
	case kind == message.KindData && commandSet:
		return req, usageErrorf("--command, --reply-to and --correlation-id are for command messages: add --kind command")
	case kind == message.KindCommand:
		req.Command = &adminapi.Command{Name: o.command, ReplyTo: o.replyTo, CorrelationID: o.correlationID}
	case dataSet:
		req.Data = &adminapi.Data{DataType: o.dataType, Encoding: o.encoding}
	}
	first := map[string]string{}
	for _, p := range o.props {
		prop, err := parseProp(p)
		if err != nil {
			return req, err
		}
		// The node refuses a message with a key twice; say so here, as
		// the bad command line it is.
		if was, dup := first[prop.Key]; dup {
			return req, usageErrorf("--prop %q: key %q is given twice (first as %q)", p, prop.Key, was)
		}
		first[prop.Key] = p
		req.Properties = append(req.Properties, prop)
	}
	return req, nil
}

// priorityFlag checks --priority, whose default is the node's own
// (message.DefaultPriority).
func priorityFlag(p int) (uint8, error) {
	if p < message.MinPriority || p > message.MaxPriority {
		return 0, usageErrorf("--priority %d: want %d to %d", p, message.MinPriority, message.MaxPriority)
	}
	return uint8(p), nil
}

// ttlFlag checks --ttl: 0, its default, is a message that never expires.
func ttlFlag(ttl time.Duration) error {
	if ttl < 0 {
		return usageErrorf("--ttl %v: negative; leave it out for a message that never expires", ttl)
	}
	return nil
}

// parseProp reads --prop key=type:value.
func parseProp(s string) (adminapi.Property, error) {
	key, tv, ok := strings.Cut(s, "=")
	typ, value, ok2 := strings.Cut(tv, ":")
	if !ok || !ok2 || key == "" {
		return adminapi.Property{}, usageErrorf("--prop %q: want key=type:value, such as line=int32:3", s)
	}
	t, err := message.ParseType(typ)
	if err != nil {
		return adminapi.Property{}, usageErrorf("--prop %q: %v", s, err)
	}
	if _, err := message.ParseValue(t, value); err != nil {
		return adminapi.Property{}, usageErrorf("--prop %q: %v", s, err)
	}
	return adminapi.Property{Key: key, Type: t.String(), Value: value}, nil
}

// readBody reads the body argument: text, @file or - for stdin.
func readBody(arg string, stdin io.Reader) ([]byte, error) {
	switch {
	case arg == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read the body from standard input: %w", err)
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, fmt.Errorf("read the body: %w", err)
		}
		return b, nil
	}
	return []byte(arg), nil
}
