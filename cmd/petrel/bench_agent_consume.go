package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

type consumeOptions struct {
	cfgPath, from, urgentKey string
	messages                 int
}

// consumedEvent is printed once every message was received and acked.
// Times are Unix nanoseconds; latencies run from the sent_ns property
// (submit at the producer) to the receive here.
type consumedEvent struct {
	Event string `json:"event"` // "consumed"
	Count int    `json:"count"`
	// ReadyNs is when the node was open and consuming began.
	ReadyNs int64   `json:"ready_ns"`
	FirstNs int64   `json:"first_ns"`
	LastNs  int64   `json:"last_ns"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	// UrgentNs is when the message whose body starts with --urgent-key
	// was received, 0 if none; UrgentIndex is its rank (0 = first).
	UrgentNs    int64   `json:"urgent_ns"`
	UrgentIndex int     `json:"urgent_index"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
}

func newAgentConsumeCmd() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume -c file --from addr",
		Short: "Open a node and consume messages on it",
		Long: `Open the node of -c, print its ready line, receive and ack --messages
messages of the local address --from, then print {"event":"consumed",...}
with the latency percentiles (now - sent_ns), and keep the node open until
stdin closes or a signal comes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentConsume(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	f.StringVar(&o.from, "from", benchAddr, "local `address` to consume")
	f.IntVar(&o.messages, "messages", 1000, "messages to consume")
	f.StringVar(&o.urgentKey, "urgent-key", "", "report when the message whose body starts with this `key` arrives")
	return cmd
}

func runAgentConsume(ctx context.Context, o consumeOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if o.messages < 1 {
		return usageErrorf("invalid argument %d for \"--messages\" flag: want at least 1", o.messages)
	}
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, o.cfgPath, stdout, stderr)
	if err != nil {
		return err
	}
	ev, err := a.consume(ctx, o)
	if err == nil {
		err = a.event(ev)
	}
	if err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

func (a *agent) consume(ctx context.Context, o consumeOptions) (consumedEvent, error) {
	ev := consumedEvent{Event: "consumed", ReadyNs: a.readyAt.UnixNano(), UrgentIndex: -1}
	c, err := a.node.Consumer(o.from)
	if err != nil {
		return ev, err
	}
	key := []byte(o.urgentKey)
	lat := make(latencies, 0, o.messages)
	for ev.Count < o.messages {
		d, err := c.Receive(ctx)
		if err != nil {
			return ev, fmt.Errorf("receive message %d of %d: %w", ev.Count+1, o.messages, err)
		}
		now := time.Now().UnixNano()
		if ev.Count == 0 {
			ev.FirstNs = now
		}
		ev.LastNs = now
		if v, ok := d.Properties.Get(sentNsProperty); ok {
			lat = append(lat, time.Duration(now-v.Int64()))
		}
		if len(key) > 0 && ev.UrgentNs == 0 && bytes.HasPrefix(d.Body, key) {
			ev.UrgentNs, ev.UrgentIndex = now, ev.Count
		}
		if err := d.Ack(); err != nil {
			return ev, fmt.Errorf("ack message %d: %w", ev.Count+1, err)
		}
		ev.Count++
	}
	pct := lat.percentiles(50, 99, 100)
	ev.P50ms, ev.P99ms, ev.MaxMs = round(ms(pct[0]), 3), round(ms(pct[1]), 3), round(ms(pct[2]), 3)
	ev.PeakRSSMB = currentPeakRSS()
	return ev, nil
}
