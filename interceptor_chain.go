package petrel

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
)

// interceptors is the node's chain of Interceptors, in registration
// order. With none registered, every method returns at a length check:
// the message path pays nothing else. Safe for concurrent use; the list
// never changes after Open.
type interceptors struct {
	list []Interceptor
	node string // this node's name, the identity of the embedded path
	log  *slog.Logger

	duration *prometheus.HistogramVec
	refusals *prometheus.CounterVec
	// observe and refuse are the vectors' children per hook, resolved
	// once: a label lookup per message would cost more than a hook.
	observe [hookCount]prometheus.Observer
	refuse  [hookCount]prometheus.Counter

	panicLogged atomic.Int64 // unix nanoseconds of the last panic logged
	panicQuiet  atomic.Int64 // panics not logged since
}

// hook names one Interceptor method, as the metrics label it.
type hook uint8

const (
	hookConnect hook = iota
	hookDisconnect
	hookPublish
	hookSubscribe
	hookUnsubscribe
	hookDeliver
	hookAck
	hookCount
)

var hookNames = [hookCount]string{"connect", "disconnect", "publish", "subscribe", "unsubscribe", "deliver", "ack"}

// panicLogEvery bounds the stacks logged: an interceptor that panics on
// every message must not flood the log.
const panicLogEvery = 10 * time.Second

// interceptorsIn are the interceptors an fx application provides, as
// fx.Annotate(newAuditor, fx.ResultTags(`group:"petrel.interceptors"`)).
type interceptorsIn struct {
	fx.In
	Cfg   Config
	Group []Interceptor `group:"petrel.interceptors"`
}

// newInterceptors makes the chain: Config's interceptors, then the fx
// group's. Nil entries are skipped.
func newInterceptors(in interceptorsIn) *interceptors {
	cfg := in.Cfg.withDefaults()
	ic := &interceptors{
		node: cfg.Name,
		log:  cfg.Logger.With(slog.String(logkey.Component, "interceptors"), slog.String("node", cfg.Name)),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "petrel_interceptor_duration_seconds",
			Help:    "Time spent in the interceptor chain, by hook.",
			Buckets: prometheus.ExponentialBuckets(0.000001, 4, 12), // 1µs .. 4s
		}, []string{"hook"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "petrel_interceptor_refusals_total",
			Help: "Publishes, subscriptions and connections an interceptor refused (panics included), by hook.",
		}, []string{"hook"}),
	}
	for _, i := range append(append([]Interceptor(nil), in.Cfg.Interceptors...), in.Group...) {
		if i != nil {
			ic.list = append(ic.list, i)
		}
	}
	for h := range hookCount {
		ic.observe[h] = ic.duration.WithLabelValues(hookNames[h])
		ic.refuse[h] = ic.refusals.WithLabelValues(hookNames[h])
	}
	return ic
}

func (ic *interceptors) collectors() []prometheus.Collector {
	return []prometheus.Collector{ic.duration, ic.refusals}
}

// on reports whether any interceptor is registered.
func (ic *interceptors) on() bool { return ic != nil && len(ic.list) > 0 }

// run calls f on each interceptor in order until one fails, and times the
// chain. A panic is a failure.
func (ic *interceptors) run(h hook, f func(Interceptor) error) error {
	start := time.Now()
	var err error
	for _, i := range ic.list {
		if err = ic.call(h, i, f); err != nil {
			ic.refuse[h].Inc()
			break
		}
	}
	ic.observe[h].Observe(time.Since(start).Seconds())
	return err
}

// call calls f on i, turning a panic into an error.
func (ic *interceptors) call(h hook, i Interceptor, f func(Interceptor) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("interceptor %T panicked in %s: %v", i, hookNames[h], r)
			ic.logPanic(err)
		}
	}()
	return f(i)
}

// logPanic logs a panic with its stack, at most once per panicLogEvery;
// the next line says how many were not logged meanwhile.
func (ic *interceptors) logPanic(err error) {
	now := time.Now().UnixNano()
	last := ic.panicLogged.Load()
	if now-last < int64(panicLogEvery) || !ic.panicLogged.CompareAndSwap(last, now) {
		ic.panicQuiet.Add(1)
		return
	}
	ic.log.Error("interceptor panicked; taken as a refusal", slog.Any(logkey.Error, err),
		slog.Int64("not_logged_since", ic.panicQuiet.Swap(0)), slog.String("stack", string(debug.Stack())))
}

// local is the embedded path's ConnInfo.
func (ic *interceptors) local() ConnInfo { return ConnInfo{Identity: ic.node, Path: PathEmbedded} }

// identity is the part of a message no hook may change: its identity and
// route. The chain puts it back after each interceptor, so that the next
// one (a policy after an enriching one, an audit) decides on the
// message's own, not on what an earlier hook wrote.
type identity struct {
	id     uint64
	origin message.NodeID
	dest   string
	kind   message.Kind
	ts     time.Time
	file   message.FileProps
}

func identityOf(m *message.Message) identity {
	return identity{id: m.ID, origin: m.Origin, dest: m.Destination, kind: m.Kind, ts: m.Timestamp, file: m.File}
}

// restore undoes any change to m's identity and route.
func (x *identity) restore(m *message.Message) {
	m.ID, m.Origin, m.Destination, m.Kind, m.Timestamp, m.File = x.id, x.origin, x.dest, x.kind, x.ts, x.file
}

// publish runs OnPublish, undoing changes to m's identity and route after
// each interceptor. A refusal wraps ErrIntercepted and the interceptor's
// error.
func (ic *interceptors) publish(ctx context.Context, m *message.Message, from ConnInfo) error {
	if !ic.on() {
		return nil
	}
	x := identityOf(m)
	err := ic.run(hookPublish, func(i Interceptor) error {
		err := i.OnPublish(ctx, m, from)
		x.restore(m)
		return err
	})
	x.restore(m) // after a panic too, which skipped the restore in the loop
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIntercepted, err)
	}
	return nil
}

// publishLocal is publish for the node's own Producer.
func (ic *interceptors) publishLocal(ctx context.Context, m *message.Message) error {
	if !ic.on() {
		return nil
	}
	if err := ic.publish(ctx, m, ic.local()); err != nil {
		return fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	return nil
}

func (ic *interceptors) connect(ctx context.Context, c ConnInfo) error {
	if !ic.on() {
		return nil
	}
	err := ic.run(hookConnect, func(i Interceptor) error { return i.OnConnect(ctx, c) })
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIntercepted, err)
	}
	return nil
}

func (ic *interceptors) subscribe(ctx context.Context, s SubscribeInfo) error {
	if !ic.on() {
		return nil
	}
	err := ic.run(hookSubscribe, func(i Interceptor) error { return i.OnSubscribe(ctx, s) })
	if err != nil {
		return fmt.Errorf("subscribe to %q: %w: %w", s.Address, ErrIntercepted, err)
	}
	return nil
}

// The observing hooks: a panic is logged, and the path goes on. Their
// callers check on() first; run over an empty list would only time it.

func (ic *interceptors) disconnect(c ConnInfo) {
	_ = ic.run(hookDisconnect, func(i Interceptor) error { i.OnDisconnect(c); return nil })
}

func (ic *interceptors) unsubscribe(s SubscribeInfo) {
	_ = ic.run(hookUnsubscribe, func(i Interceptor) error { i.OnUnsubscribe(s); return nil })
}

// deliver runs OnDeliver on the copy m, undoing changes to its identity
// and route after each interceptor, as publish does.
func (ic *interceptors) deliver(ctx context.Context, m *message.Message, to ConnInfo) {
	x := identityOf(m)
	_ = ic.run(hookDeliver, func(i Interceptor) error {
		i.OnDeliver(ctx, m, to)
		x.restore(m)
		return nil
	})
	x.restore(m) // after a panic too
}

func (ic *interceptors) ack(a AckInfo) {
	_ = ic.run(hookAck, func(i Interceptor) error { i.OnAck(a); return nil })
}

// consumer runs OnSubscribe for the node's own consumer c, and wraps its
// backend so that deliveries, settles and Close reach the chain. With no
// interceptors it returns c as it is.
func (ic *interceptors) consumer(c *Consumer) (*Consumer, error) {
	return ic.consumerFor(c, ic.local())
}

// consumerFor is consumer for a consumer on conn's behalf.
func (ic *interceptors) consumerFor(c *Consumer, conn ConnInfo) (*Consumer, error) {
	if !ic.on() {
		return c, nil
	}
	sub := SubscribeInfo{Address: c.addr, Conn: conn}
	if err := ic.subscribe(context.Background(), sub); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c.b = &interceptedConsumer{consumeBackend: c.b, ic: ic, sub: sub}
	return c, nil
}

// interceptedConsumer is a consumeBackend that hands each delivery to
// OnDeliver and each settle to OnAck, and says OnUnsubscribe once, at its
// first close.
type interceptedConsumer struct {
	consumeBackend
	ic   *interceptors
	sub  SubscribeInfo
	once sync.Once
}

func (c *interceptedConsumer) poll() (*Delivery, error) {
	d, err := c.consumeBackend.poll()
	if err == nil {
		c.delivered(context.Background(), d)
	}
	return d, err
}

func (c *interceptedConsumer) receive(ctx context.Context) (*Delivery, error) {
	d, err := c.consumeBackend.receive(ctx)
	if err == nil {
		c.delivered(ctx, d)
	}
	return d, err
}

// receiveBatch takes the batch from the backend when it takes batches, and
// hands each delivery to OnDeliver; otherwise it takes one at a time,
// through receive and poll, which do.
func (c *interceptedConsumer) receiveBatch(ctx context.Context, max int) ([]*Delivery, error) {
	b, ok := c.consumeBackend.(batchBackend)
	if !ok {
		return receiveEach(c, ctx, max)
	}
	ds, err := b.receiveBatch(ctx, max)
	for _, d := range ds {
		c.delivered(ctx, d)
	}
	return ds, err
}

func (c *interceptedConsumer) pollBatch(max int) ([]*Delivery, error) {
	b, ok := c.consumeBackend.(batchBackend)
	if !ok {
		return pollEach(c, max)
	}
	ds, err := b.pollBatch(max)
	for _, d := range ds {
		c.delivered(context.Background(), d)
	}
	return ds, err
}

func (c *interceptedConsumer) close() {
	c.consumeBackend.close()
	c.once.Do(func() { c.ic.unsubscribe(c.sub) })
}

func (c *interceptedConsumer) delivered(ctx context.Context, d *Delivery) {
	c.ic.deliver(ctx, d.Message, c.sub.Conn)
	d.lease = &interceptedLease{lease: d.lease, c: c, id: d.ID, origin: d.Origin}
}

// interceptedLease tells OnAck about a settle the queue took.
type interceptedLease struct {
	lease
	c      *interceptedConsumer
	id     uint64
	origin message.NodeID
}

func (l *interceptedLease) Ack() error {
	err := l.lease.Ack()
	if err == nil {
		l.c.ic.ack(AckInfo{Address: l.c.sub.Address, ID: l.id, Origin: l.origin, Conn: l.c.sub.Conn})
	}
	return err
}

func (l *interceptedLease) Nack(reason string) error {
	err := l.lease.Nack(reason)
	if err == nil {
		l.c.ic.ack(AckInfo{Address: l.c.sub.Address, ID: l.id, Origin: l.origin, Conn: l.c.sub.Conn, Nack: true, Reason: reason})
	}
	return err
}
