package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// clientMeasure is what the clients of a `bench client` run measured.
type clientMeasure struct {
	publish, consume time.Duration
	lat              latencies // every publish's, submit -> durable
}

// measureClients dials the node at url with the producing and consuming
// clients and runs the workload: publish, then consume, or both at once.
func measureClients(ctx context.Context, url string, o ClientOptions, progress io.Writer) (*clientMeasure, error) {
	log := slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var clients []*petrel.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	window, windowBytes, _ := o.dialWindow()
	dial := func(name string, n int) ([]*petrel.Client, error) {
		var cs []*petrel.Client
		for i := range n {
			c, err := petrel.Dial(ctx, url, petrel.DialOptions{
				Name: fmt.Sprintf("%s-%d", name, i+1), Window: window, WindowBytes: windowBytes, ConsumerWindow: o.ConsumerWindow, Logger: log,
			})
			if err != nil {
				return nil, err
			}
			clients = append(clients, c)
			cs = append(cs, c)
		}
		return cs, nil
	}
	producers, err := dial("producer", o.Producers)
	if err != nil {
		return nil, err
	}
	consumers, err := dial("consumer", o.Consumers)
	if err != nil {
		return nil, err
	}
	m := &clientMeasure{}
	var cg *consumerGroup
	var consStart time.Time
	if o.Concurrent {
		fmt.Fprintf(progress, "publishing and consuming %d messages...\n", o.Messages)
		if cg, err = startClientConsumers(ctx, consumers, int64(o.Messages)); err != nil {
			return nil, err
		}
		consStart = time.Now()
	} else {
		fmt.Fprintf(progress, "publishing %d messages...\n", o.Messages)
	}
	start := time.Now()
	// Each producer holds a slot per publish up to the client's count; the
	// client's byte bound, if lower, makes SendAsync wait.
	sent, err := publishAll(ctx, producers, o.Messages, window, make([]byte, o.Size))
	if err != nil {
		if cg != nil {
			cg.stop()
		}
		return nil, fmt.Errorf("publish: %w", err)
	}
	m.publish, m.lat = sent.last.Sub(start), sent.lat
	if !o.Concurrent {
		fmt.Fprintf(progress, "published in %v; consuming...\n", m.publish.Round(time.Millisecond))
		consStart = time.Now()
		if cg, err = startClientConsumers(ctx, consumers, int64(o.Messages)); err != nil {
			return nil, err
		}
	}
	acked, end, err := cg.wait()
	if err != nil {
		return nil, fmt.Errorf("consume: %w (acked %d of %d)", err, acked, o.Messages)
	}
	m.consume = end.Sub(consStart)
	return m, nil
}

// startClientConsumers subscribes each client to the bench address and
// consumes with one goroutine per client, until target messages were
// acked in all.
func startClientConsumers(ctx context.Context, clients []*petrel.Client, target int64) (*consumerGroup, error) {
	cctx, cancel := context.WithCancel(ctx)
	g := &consumerGroup{parent: ctx, cancel: cancel, target: target}
	var cons []*petrel.Consumer
	for _, c := range clients {
		cn, err := c.Consumer(Addr)
		if err != nil {
			cancel()
			return nil, err
		}
		cons = append(cons, cn)
	}
	g.wg.Add(len(cons))
	for _, cn := range cons {
		go g.consumeLoop(cctx, cn)
	}
	return g, nil
}

// publishAll sends n messages from the producers, spread evenly, each
// keeping window publishes in flight (see produce).
func publishAll(ctx context.Context, clients []*petrel.Client, n, window int, body []byte) (*sendResult, error) {
	return spreadSends(ctx, clients, n, func(ctx context.Context, c *petrel.Client, count int) (*sendResult, error) {
		return produce(ctx, c.Producer(), Addr, count, window, body, true)
	})
}

// spreadSends runs send on each of the senders at once, n messages spread
// evenly over them, and merges their results; the first error stops the
// others.
func spreadSends[T any](ctx context.Context, senders []T, n int, send func(ctx context.Context, s T, count int) (*sendResult, error)) (*sendResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		res   = &sendResult{}
		first error
	)
	for i, s := range senders {
		count := n / len(senders)
		if i < n%len(senders) {
			count++
		}
		wg.Go(func() {
			r, err := send(ctx, s, count)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				cancel()
				return
			}
			res.lat = append(res.lat, r.lat...)
			if r.last.After(res.last) {
				res.last = r.last
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return res, ctx.Err()
}
