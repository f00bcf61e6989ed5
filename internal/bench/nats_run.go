package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS JetStream side of `bench client --against-nats` and `bench
// local --against-nats`: the same workload as Petrel's run, with the
// official Go client against a nats-server of the bench's own. Producers
// publish with JetStream's async publish into a file-storage stream, each
// on its own connection with window publishes awaiting their ack; a
// work-queue stream deletes a message once acked, as a Petrel queue does.
// Consumers share one durable pull consumer, each on its own connection
// with consumerWindow messages pulled ahead, and ack every message
// explicitly.

// natsStream and natsSubject are the stream the NATS side publishes to and
// its one subject; natsConsumer is the durable pull consumer.
const (
	natsStream   = "PETREL_BENCH"
	natsSubject  = "bench"
	natsConsumer = "bench"
)

// natsVersionNote follows nats-server's version in the human figures: what
// its durability is, beside Petrel's sync full.
const natsVersionNote = " (JetStream file storage, default sync_interval: no fsync per message)"

// NATSFigures are what NATS JetStream did in the same invocation. The
// field names are a contract with the scripts that compare runs: add,
// never rename.
type NATSFigures struct {
	// Publishing: first async publish -> last PubAck; consuming: 0 when
	// the run did not consume.
	flowFigures
	// ServerPeakRSSMB is nats-server's VmHWM.
	ServerPeakRSSMB float64 `json:"server_peak_rss_mb"`
	Pid             int     `json:"pid"`
}

// natsWorkload is what the NATS side runs: the flags of the Petrel run it
// stands beside.
type natsWorkload struct {
	Producers, Window, Messages, Size int
	// Consumers 0 publishes only (bench local times Petrel's enqueue
	// alone, its consumers running beside; see measureNATS).
	Consumers, ConsumerWindow int
	Concurrent                bool
}

// runNATS starts nats-server exe in dir, measures w against it and stops
// it. The server lives on life, so that it is killed if the bench ends
// before it could stop it.
func runNATS(ctx, life context.Context, exe, dir string, w natsWorkload, progress io.Writer) (f *NATSFigures, err error) {
	s, err := StartNATS(life, exe, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := s.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop nats-server: %w", serr)
		}
	}()
	fmt.Fprintf(progress, "nats-server on %s, pid %d: JetStream, file storage...\n", s.URL(), s.Pid())
	f, err = measureNATS(ctx, s.URL(), w, progress)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	f.Pid = s.Pid()
	if rss, err := s.PeakRSSMB(); err == nil {
		f.ServerPeakRSSMB = round(rss, 2)
	}
	return f, nil
}

// measureNATS runs w against the server at url.
func measureNATS(ctx context.Context, url string, w natsWorkload, progress io.Writer) (*NATSFigures, error) {
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	dial := func(name string, n int) ([]*nats.Conn, error) {
		var out []*nats.Conn
		for i := range n {
			nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("%s-%d", name, i+1)), nats.NoReconnect())
			if err != nil {
				return nil, err
			}
			conns = append(conns, nc)
			out = append(out, nc)
		}
		return out, nil
	}
	producers, err := dial("producer", w.Producers)
	if err != nil {
		return nil, err
	}
	consumers, err := dial("consumer", w.Consumers)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(producers[0])
	if err != nil {
		return nil, err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: natsStream, Subjects: []string{natsSubject},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Replicas: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream: %w", err)
	}
	f := &NATSFigures{}
	var cg *natsConsumers
	var consStart time.Time
	if w.Consumers > 0 {
		if _, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
			// Every consumer may hold its window unacked, as a Petrel
			// consumer holds its pushed deliveries.
			MaxAckPending: w.Consumers * w.ConsumerWindow,
		}); err != nil {
			return nil, fmt.Errorf("create consumer: %w", err)
		}
	}
	if w.Concurrent && w.Consumers > 0 {
		fmt.Fprintf(progress, "nats: publishing and consuming %d messages...\n", w.Messages)
		if cg, err = startNATSConsumers(ctx, consumers, w, int64(w.Messages)); err != nil {
			return nil, err
		}
		consStart = time.Now()
	} else {
		fmt.Fprintf(progress, "nats: publishing %d messages...\n", w.Messages)
	}
	start := time.Now()
	sent, err := natsPublishAll(ctx, producers, w.Messages, w.Window, make([]byte, w.Size))
	if err != nil {
		if cg != nil {
			cg.stop()
		}
		return nil, fmt.Errorf("publish: %w", err)
	}
	publish := sent.last.Sub(start)
	f.setPublish(w.Messages, publish, sent.lat)
	if w.Consumers == 0 {
		return f, nil
	}
	if !w.Concurrent {
		fmt.Fprintf(progress, "nats: published in %v; consuming...\n", publish.Round(time.Millisecond))
		consStart = time.Now()
		if cg, err = startNATSConsumers(ctx, consumers, w, int64(w.Messages)); err != nil {
			return nil, err
		}
	}
	acked, end, err := cg.wait()
	if err != nil {
		return nil, fmt.Errorf("consume: %w (acked %d of %d)", err, acked, w.Messages)
	}
	f.setConsume(w.Messages, end.Sub(consStart))
	return f, nil
}

// natsPublishAll publishes n messages from the producer connections,
// spread evenly, each keeping window publishes awaiting their PubAck.
func natsPublishAll(ctx context.Context, conns []*nats.Conn, n, window int, body []byte) (*sendResult, error) {
	return spreadSends(ctx, conns, n, func(ctx context.Context, nc *nats.Conn, count int) (*sendResult, error) {
		return natsProduce(ctx, nc, count, window, body)
	})
}

// natsAck is one async publish a producer waits on.
type natsAck struct{ paf jetstream.PubAckFuture }

// Wait returns once the publish is acknowledged or refused, or ctx ends.
func (a natsAck) Wait(ctx context.Context) error {
	select {
	case <-a.paf.Ok():
		return nil
	case err := <-a.paf.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// natsProduce is one producer, as produce is for Petrel: it submits count
// async publishes through windowed.
func natsProduce(ctx context.Context, nc *nats.Conn, count, window int, body []byte) (*sendResult, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return nil, err
	}
	return windowed(ctx, count, window, true, func(time.Time) (natsAck, error) {
		paf, err := js.PublishAsync(natsSubject, body)
		return natsAck{paf}, err
	})
}

// natsConsumers is the consumers of the NATS side: they ack until target
// messages were acked in all, or ctx ends.
type natsConsumers struct {
	parent context.Context
	cancel context.CancelFunc
	ccs    []jetstream.ConsumeContext
	target int64
	acked  atomic.Int64
	// end is when the target-th ack was sent, written by the handler that
	// sent it before done closes.
	end  time.Time
	done chan struct{}

	mu      sync.Mutex
	lastErr error // the last error the client reported, for a run that never ends
}

// startNATSConsumers starts one Consume per connection on the shared
// durable consumer, each pulling w.ConsumerWindow messages ahead.
func startNATSConsumers(ctx context.Context, conns []*nats.Conn, w natsWorkload, target int64) (*natsConsumers, error) {
	cctx, cancel := context.WithCancel(ctx)
	g := &natsConsumers{parent: ctx, cancel: cancel, target: target, done: make(chan struct{})}
	for _, nc := range conns {
		js, err := jetstream.New(nc)
		if err != nil {
			g.stop()
			return nil, err
		}
		cons, err := js.Consumer(cctx, natsStream, natsConsumer)
		if err != nil {
			g.stop()
			return nil, err
		}
		cc, err := cons.Consume(g.handle, jetstream.PullMaxMessages(w.ConsumerWindow),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				g.mu.Lock()
				g.lastErr = err
				g.mu.Unlock()
			}))
		if err != nil {
			g.stop()
			return nil, err
		}
		g.ccs = append(g.ccs, cc)
	}
	return g, nil
}

// handle acks one message: Ack sends the ack without waiting for the
// server's confirmation, as a Petrel client's Ack queues its ack to the
// node.
func (g *natsConsumers) handle(m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		g.mu.Lock()
		g.lastErr = err
		g.mu.Unlock()
		return
	}
	if g.acked.Add(1) == g.target {
		g.end = time.Now()
		close(g.done)
	}
}

// wait blocks until target messages were acked, or ctx ended, and stops
// the consumers.
func (g *natsConsumers) wait() (int64, time.Time, error) {
	defer g.stop()
	select {
	case <-g.done:
		return g.acked.Load(), g.end, nil
	case <-g.parent.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.acked.Load(), time.Time{}, errors.Join(g.parent.Err(), g.lastErr)
	}
}

// stop stops every Consume and waits until its handler has returned.
func (g *natsConsumers) stop() {
	g.cancel()
	for _, cc := range g.ccs {
		cc.Stop()
	}
	for _, cc := range g.ccs {
		<-cc.Closed()
	}
}

// lines are the human figures of the NATS side.
func (f *NATSFigures) lines() []figure {
	figs := []figure{
		{"nats publish", fmt.Sprintf("%.0f msgs/s (JetStream async publish, %.3f s)", f.PublishMsgsPerSec, f.PublishSeconds)},
	}
	if f.ConsumeMsgsPerSec > 0 {
		figs = append(figs, figure{"nats consume", fmt.Sprintf("%.0f msgs/s (pull consumer, explicit acks, %.3f s)", f.ConsumeMsgsPerSec, f.ConsumeSeconds)})
	}
	return append(figs,
		figure{"nats publish latency", fmt.Sprintf("p50 %.3f ms, p99 %.3f ms, max %.3f ms (publish -> PubAck)", f.P50ms, f.P99ms, f.MaxMs)},
		figure{"nats peak RSS server", fmt.Sprintf("%.1f MiB", f.ServerPeakRSSMB)})
}
