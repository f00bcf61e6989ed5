package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// ConsumeOptions are the flags of `bench agent consume`.
type ConsumeOptions struct {
	From, UrgentKey string
	Messages        int
	// Queues is how many addresses the producer spread the messages over,
	// QueueName(From, i, Queues), round robin.
	Queues int
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
	// The node's group commits until then (see commitWatch).
	commitFigures
}

// RunAgentConsume runs `bench agent consume`: it opens the node, prints
// its ready line, receives and acks o.Messages messages of o.From, prints
// the consumed event, and keeps the node open until stdin closes or a
// signal comes.
func RunAgentConsume(ctx context.Context, open OpenFunc, o ConsumeOptions, stdin io.Reader, stdout io.Writer) error {
	if o.Messages < 1 {
		return usageErrorf("invalid argument %d for \"--messages\" flag: want at least 1", o.Messages)
	}
	if o.Queues < 1 {
		return usageErrorf("invalid argument %d for \"--queues\" flag: want at least 1", o.Queues)
	}
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, open, stdout)
	if err != nil {
		return err
	}
	consume := a.consume
	if o.Queues > 1 {
		consume = a.consumeQueues
	}
	stop, err := cpuProfile(a.node.Name())
	if err != nil {
		return a.close(err)
	}
	ev, err := consume(ctx, o)
	err = errors.Join(err, stop())
	if err == nil {
		err = a.event(ev)
	}
	if err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

func (a *agent) consume(ctx context.Context, o ConsumeOptions) (consumedEvent, error) {
	ev := consumedEvent{Event: "consumed", ReadyNs: a.readyAt.UnixNano(), UrgentIndex: -1}
	c, err := a.node.Consumer(o.From)
	if err != nil {
		return ev, err
	}
	key := []byte(o.UrgentKey)
	lat := make(latencies, 0, o.Messages)
	for ev.Count < o.Messages {
		d, err := c.Receive(ctx)
		if err != nil {
			return ev, fmt.Errorf("receive message %d of %d: %w", ev.Count+1, o.Messages, err)
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
	ev.PeakRSSMB, ev.commitFigures = currentPeakRSS(), agentCommits.figures()
	return ev, nil
}

// consumeQueues receives from o.Queues addresses at once, one goroutine
// each, every one its round-robin share of o.Messages.
func (a *agent) consumeQueues(ctx context.Context, o ConsumeOptions) (consumedEvent, error) {
	ev := consumedEvent{Event: "consumed", ReadyNs: a.readyAt.UnixNano(), UrgentIndex: -1}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		lat   = make(latencies, 0, o.Messages)
		wg    sync.WaitGroup
		first = int64(math.MaxInt64)
	)
	for i := range o.Queues {
		share := o.Messages / o.Queues
		if i < o.Messages%o.Queues {
			share++
		}
		if share == 0 {
			continue
		}
		c, err := a.node.Consumer(QueueName(o.From, i, o.Queues))
		if err != nil {
			return ev, err
		}
		wg.Go(func() {
			mine := make(latencies, 0, share)
			var lo, hi int64 = math.MaxInt64, 0
			for range share {
				d, err := c.Receive(ctx)
				if err != nil {
					cancel(fmt.Errorf("receive from %s: %w", c.Address(), err))
					return
				}
				now := time.Now().UnixNano()
				lo, hi = min(lo, now), max(hi, now)
				if v, ok := d.Properties.Get(sentNsProperty); ok {
					mine = append(mine, time.Duration(now-v.Int64()))
				}
				if err := d.Ack(); err != nil {
					cancel(fmt.Errorf("ack from %s: %w", c.Address(), err))
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			first, ev.LastNs = min(first, lo), max(ev.LastNs, hi)
			ev.Count += share
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return ev, err
	}
	ev.FirstNs = first
	pct := lat.percentiles(50, 99, 100)
	ev.P50ms, ev.P99ms, ev.MaxMs = round(ms(pct[0]), 3), round(ms(pct[1]), 3), round(ms(pct[2]), 3)
	ev.PeakRSSMB, ev.commitFigures = currentPeakRSS(), agentCommits.figures()
	return ev, nil
}
