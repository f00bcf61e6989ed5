package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"os"
	"os/signal"
	"sync"
	"syscall"
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
	// settle is how the messages printed are settled: ack, nack or
	// release. Ack and nack ask the node for settle "later" and settle
	// once the messages are printed (see take).
	settle string
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
when recv returns. recv asks the node to hold them until it has printed
them, so a recv killed before then (even with SIGKILL) loses none: the node
delivers them again when the address's lease_timeout passes. With --no-ack they are released instead, and delivered
again at once; with --nack they are nacked, with --reason, and delivered
again after the address's backoff, or moved to its dead-letter queue past
its max_deliveries. recv prints each message as it arrives; an answer of
the node holds at most 8 MiB of messages past its first, and recv asks
again until it has --count of them or --wait is over.

Ctrl-C (SIGINT) or SIGTERM while recv waits for messages ends the wait:
the node takes nothing more, and recv prints what the node had already
sent. Once messages arrive, recv prints them all, and settles them, before
it stops. Either way it then exits 130 (SIGINT) or 143 (SIGTERM), and every
message acked was printed. A message printed just before recv is killed may
be printed again by the next recv: at least once, never lost.

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
			return o.take(cmd, adminapi.PathRecv, args[0], func(count int, wait time.Duration) any {
				req.Count, req.Wait = count, wait
				return req
			})
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
	req := adminapi.RecvRequest{Address: addr, Count: o.count, Wait: o.wait, Settle: adminapi.SettleLater}
	o.settle = adminapi.SettleAck
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
		// Released as they are written: nothing to lose.
		req.Settle, o.settle = adminapi.SettleRelease, adminapi.SettleRelease
	case o.nack:
		o.settle = adminapi.SettleNack
		if o.reason == "" {
			o.reason = "nacked with petrel recv"
		}
	}
	return req, nil
}

// take asks the node at path (recv or subscribe) for up to o.count
// messages, within o.wait, with the request that req makes for a count and
// a wait, and prints each as it is decoded. An answer cut short at the
// node's byte budget is followed by another request for the rest.
//
// SIGINT and SIGTERM do not kill it once the first request is out: one
// that comes before the node answers hangs up the request, which ends the
// node's wait; one that comes later waits for the answer being read to be
// printed whole, since the node acks its messages once it has written
// them. take then returns an exit status of 128 + the signal's number.
func (o *recvOptions) take(cmd *cobra.Command, path, addr string, req func(count int, wait time.Duration) any) error {
	c, err := newAdminClient(o.node.server, o.node.cfgPath, o.node.dataDir, o.node.tokenFile, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer c.close()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	deadline := time.Now().Add(o.wait)
	printed := 0
	for {
		ans, err := o.takeOnce(cmd.Context(), c, sigs, path, req(o.count-printed, max(time.Until(deadline), 0)), func(m adminapi.Message) error {
			printed++
			return o.printOne(out, m, printed)
		})
		if sig := ans.signal; sig != nil {
			var serr error
			if err == nil && ans.Error == "" {
				// What was printed is settled before recv stops.
				serr = o.settleLater(cmd.Context(), c, &ans)
			}
			return interrupted(sig, ans, err, serr)
		}
		if err != nil {
			return err
		}
		if ans.Error != "" {
			return errors.New(ans.Error)
		}
		if ans.Settled == "" {
			return fmt.Errorf("the answer ended before the node said how it settled the messages: it released them, and delivers them again")
		}
		if err := o.settleLater(cmd.Context(), c, &ans); err != nil {
			return err
		}
		if !ans.More || printed >= o.count {
			break
		}
	}
	if printed == 0 && !o.node.asJSON {
		fmt.Fprintf(errOut, "no message on %s\n", addr)
	}
	return nil
}

// settleLater settles the messages of an answer the node holds for
// recv (settle "later") as o.settle says, now that they are printed, and
// records it in ans.
func (o *recvOptions) settleLater(ctx context.Context, c *adminClient, ans *answer) error {
	if ans.Settled != adminapi.SettleLater {
		return nil
	}
	if ans.Lease == "" { // no message
		ans.Settled = o.settle
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var res adminapi.SettleResponse
	err := c.do(ctx, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: ans.Lease, Settle: o.settle, Reason: o.reason}, &res)
	if err != nil {
		return fmt.Errorf("settle (%s) the %d messages printed last: %w; the node delivers them again once their lease_timeout passes", o.settle, ans.printed, err)
	}
	ans.Settled = res.Settled
	return nil
}

// interrupted is the error that ends take after sig.
func interrupted(sig os.Signal, ans answer, err, settleErr error) error {
	code := 128
	if s, ok := sig.(syscall.Signal); ok {
		code += int(s)
	}
	msg := "interrupted"
	switch {
	case settleErr != nil:
		msg += "; " + settleErr.Error()
	case ans.printed > 0 && ans.Settled != "" && ans.Settled != adminapi.SettleLater:
		msg += fmt.Sprintf("; the node settled (%s) the %d messages printed last", ans.Settled, ans.printed)
	case ans.printed > 0:
		msg += fmt.Sprintf("; the %d messages printed last were not settled: the node delivers them again", ans.printed)
	case err == nil && ans.Error != "":
		msg += "; " + ans.Error
	}
	return &exitError{code: code, err: errors.New(msg)}
}

// answer is what takeOnce read of one answer of the node.
type answer struct {
	adminapi.RecvResponse // without its Messages, printed as they came
	printed               int
	// signal is the first SIGINT or SIGTERM that came, nil if none.
	signal os.Signal
}

// takeOnce makes one request and calls each with each message of the
// answer as it is decoded.
func (o *recvOptions) takeOnce(ctx context.Context, c *adminClient, sigs <-chan os.Signal, path string, req any, each func(adminapi.Message) error) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, o.wait+callTimeout)
	defer cancel()
	h := &hangUp{cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { h.gotConn(i.Conn) }})
	done := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		defer close(got)
		select {
		case s := <-sigs:
			h.signalled()
			got <- s
		case <-done:
		}
	}()
	ans := answer{}
	err := o.readAnswer(ctx, c, path, req, h, &ans, each)
	close(done)
	if s, ok := <-got; ok {
		ans.signal = s
	} else {
		// A signal that came just as the answer ended ends the command
		// all the same.
		select {
		case s := <-sigs:
			ans.signal = s
		default:
		}
	}
	return ans, err
}

// readAnswer sends req and reads its answer, a RecvResponse, with
// json.Decoder's tokens: each message is handed to each as soon as it is
// decoded, before the rest of the answer has come.
func (o *recvOptions) readAnswer(ctx context.Context, c *adminClient, path string, req any, h *hangUp, ans *answer, each func(adminapi.Message) error) error {
	body, err := c.stream(ctx, "POST", path, req)
	if err != nil {
		return err
	}
	defer body.Close()
	// The node writes its first bytes once it has taken the messages:
	// from here a signal waits for them to be printed.
	h.start()
	bad := func(err error) error { return fmt.Errorf("read the answer of %s: %w", path, err) }
	dec := json.NewDecoder(body)
	if err := wantDelim(dec, '{'); err != nil {
		return bad(err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		switch key {
		case "messages":
			if err := wantDelim(dec, '['); err != nil {
				return bad(err)
			}
			for dec.More() {
				var m adminapi.Message
				if err := dec.Decode(&m); err != nil {
					return bad(err)
				}
				ans.printed++
				if err := each(m); err != nil {
					return err
				}
			}
			if err := wantDelim(dec, ']'); err != nil {
				return bad(err)
			}
		case "more":
			err = dec.Decode(&ans.More)
		case "settled":
			err = dec.Decode(&ans.Settled)
		case "lease":
			err = dec.Decode(&ans.Lease)
		case "error":
			err = dec.Decode(&ans.Error)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return bad(err)
		}
	}
	if err := wantDelim(dec, '}'); err != nil {
		return bad(err)
	}
	return nil
}

// wantDelim reads the next token of dec, which must be d.
func wantDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("got %v, want %v", t, d)
	}
	return nil
}

// hangUp ends a request whose answer has not started, on a signal. It
// half-closes the connection rather than closing it: the node sees the
// client leave, which ends its wait, and the bytes of an answer already
// on their way are still read and printed. A close would drop them, and
// the node may have acked the messages they hold.
type hangUp struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	conn    net.Conn
	sig     bool // a signal came
	started bool // the answer started: it is read whole
	hungUp  bool
}

func (h *hangUp) gotConn(c net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conn = c
	if h.sig && !h.started {
		h.hangUpLocked()
	}
}

func (h *hangUp) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
}

func (h *hangUp) signalled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sig = true
	if !h.started {
		h.hangUpLocked()
	}
}

func (h *hangUp) hangUpLocked() {
	if h.hungUp {
		return
	}
	h.hungUp = true
	if cw, ok := h.conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	// No connection yet, so nothing was asked of the node.
	h.cancel()
}

// printOne prints m, the nth message printed (from 1).
func (o *recvOptions) printOne(out io.Writer, m adminapi.Message, n int) error {
	if o.node.asJSON {
		return writeJSONLine(out, m)
	}
	if n > 1 {
		fmt.Fprintln(out)
	}
	printMessage(out, m)
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
