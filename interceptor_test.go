package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// errBlocked is the application's own refusal: the node must wrap it.
var errBlocked = errors.New("blocked by policy")

// hooks is an Interceptor made of functions; the hooks left nil do
// nothing. It records the events it saw, in order.
type hooks struct {
	petrel.NopInterceptor
	name      string
	publish   func(m *message.Message, from petrel.ConnInfo) error
	subscribe func(s petrel.SubscribeInfo) error
	connect   func(c petrel.ConnInfo) error

	mu     sync.Mutex
	events []string
}

func (h *hooks) record(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *hooks) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func (h *hooks) has(e string) bool { return slices.Contains(h.seen(), e) }

func (h *hooks) OnConnect(_ context.Context, c petrel.ConnInfo) error {
	h.record("connect " + c.Identity + " " + c.Path.String())
	if h.connect != nil {
		return h.connect(c)
	}
	return nil
}

func (h *hooks) OnDisconnect(c petrel.ConnInfo) { h.record("disconnect " + c.Identity) }

func (h *hooks) OnPublish(_ context.Context, m *message.Message, from petrel.ConnInfo) error {
	h.record("publish " + from.Path.String())
	if h.publish != nil {
		return h.publish(m, from)
	}
	return nil
}

func (h *hooks) OnSubscribe(_ context.Context, s petrel.SubscribeInfo) error {
	h.record("subscribe " + s.Address + " " + s.Conn.Path.String())
	if h.subscribe != nil {
		return h.subscribe(s)
	}
	return nil
}

func (h *hooks) OnUnsubscribe(s petrel.SubscribeInfo) {
	h.record("unsubscribe " + s.Address + " " + s.Conn.Path.String())
}

func (h *hooks) OnDeliver(_ context.Context, m *message.Message, to petrel.ConnInfo) {
	h.record("deliver " + to.Path.String())
	m.Properties.Set("delivered-by", message.String(h.name))
}

func (h *hooks) OnAck(a petrel.AckInfo) {
	if a.Nack {
		h.record("nack " + a.Conn.Path.String() + " " + a.Reason)
		return
	}
	h.record("ack " + a.Conn.Path.String())
}

func withInterceptors(is ...petrel.Interceptor) nodes.Option {
	return nodes.With(func(c *petrel.Config) { c.Interceptors = append(c.Interceptors, is...) })
}

// blockFlagged refuses the messages that carry the property block.
func blockFlagged(m *message.Message, _ petrel.ConnInfo) error {
	if _, ok := m.Properties.Get("block"); ok {
		return fmt.Errorf("message %d: %w", m.ID, errBlocked)
	}
	return nil
}

func prop(m *message.Message, key string) string {
	v, _ := m.Properties.Get(key)
	return v.Str()
}

// TestInterceptRefusalReachesSenders: a refused publish is refused to
// whoever sent it, with the reason, and nothing is stored: a remote
// client's Send gets ErrRefused, the node's own Send ErrIntercepted and
// the application's error.
func TestInterceptRefusalReachesSenders(t *testing.T) {
	h := &hooks{name: "n", publish: blockFlagged}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withInterceptors(h))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	ctx := context.Background()

	p := c.Producer()
	m := p.CreateDataMessage("orders")
	m.Properties.Set("block", message.String("yes"))
	err := p.Send(ctx, m)
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), errBlocked.Error()) {
		t.Fatalf("client send: %v, want ErrRefused with %q", err, errBlocked)
	}
	lp := n.Producer()
	lm := lp.CreateDataMessage("orders")
	lm.Properties.Set("block", message.String("yes"))
	if err := lp.Send(ctx, lm); !errors.Is(err, petrel.ErrIntercepted) || !errors.Is(err, errBlocked) {
		t.Fatalf("embedded send: %v, want ErrIntercepted wrapping errBlocked", err)
	}
	if err := lp.SendAsync(lm).Wait(ctx); !errors.Is(err, petrel.ErrIntercepted) {
		t.Fatalf("embedded send async: %v, want ErrIntercepted", err)
	}
	if st, ok := n.QueueStat("orders"); ok && st.Enqueued != 0 {
		t.Fatalf("a refused message was stored: %+v", st)
	}
	// What is not refused goes through, the same client's session still up.
	if err := p.Send(ctx, p.CreateDataMessage("orders")); err != nil {
		t.Fatal(err)
	}
	if st, _ := n.QueueStat("orders"); st.Enqueued != 1 {
		t.Fatalf("enqueued %d, want 1", st.Enqueued)
	}
	if !h.has("connect app-1 link") || !h.has("publish client") || !h.has("publish embedded") {
		t.Fatalf("events %q", h.seen())
	}
	d := receive(t, consumer(t, n, "orders"))
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

// TestInterceptSubscribeRefused: a refused subscription is refused to
// the embedded consumer and to a remote client.
func TestInterceptSubscribeRefused(t *testing.T) {
	h := &hooks{name: "n", subscribe: func(s petrel.SubscribeInfo) error {
		if s.Address == "secret" {
			return errBlocked
		}
		return nil
	}}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withInterceptors(h))
	if _, err := n.Consumer("secret"); !errors.Is(err, petrel.ErrIntercepted) || !errors.Is(err, errBlocked) {
		t.Fatalf("embedded consumer: %v, want ErrIntercepted wrapping errBlocked", err)
	}
	c := nodes.Dial(t, n, petrel.DialOptions{})
	if _, err := c.Consumer("secret"); !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), errBlocked.Error()) {
		t.Fatalf("client consumer: %v, want ErrRefused with the reason", err)
	}
	cons, err := c.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	petreltest.Eventually(t, "the client's unsubscribe seen", func() bool { return h.has("unsubscribe orders client") },
		func() string { return fmt.Sprintf("events %q", h.seen()) })
}

// TestInterceptPropertyCrossesLink: a property added at A's producer and
// one added at B's inbound link are seen by B's consumers, embedded and
// remote; a property added on publish at A is seen by A's own consumer.
// Every delivery passes OnDeliver, every ack OnAck.
func TestInterceptPropertyCrossesLink(t *testing.T) {
	atB := &hooks{name: "b", publish: func(m *message.Message, from petrel.ConnInfo) error {
		if from.Path == petrel.PathLink {
			m.Properties.Set("inbound-at", message.String("b:"+from.Identity))
		}
		return blockFlagged(m, from)
	}}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withInterceptors(atB))
	atA := &hooks{name: "a", publish: func(m *message.Message, from petrel.ConnInfo) error {
		m.Properties.Set("stamped-by", message.String("a"))
		m.Destination = "elsewhere" // undone: the route is not the interceptor's
		return nil
	}}
	a := nodes.Open(t, nodes.Name("a"), withInterceptors(atA), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	ctx := context.Background()
	for i, dest := range []string{"x@b", "x@b", "y"} {
		m := a.Producer().CreateDataMessage(dest)
		m.Body = []byte(fmt.Sprint(i))
		if err := a.Producer().Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	local := receive(t, consumer(t, a, "y"))
	if prop(local.Message, "stamped-by") != "a" || prop(local.Message, "delivered-by") != "a" {
		t.Fatalf("a's consumer got properties %v", local.Properties)
	}
	if err := local.Nack("later"); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []petrel.Endpoint{b, nodes.Dial(t, b, petrel.DialOptions{})} {
		d := receive(t, consumer(t, ep, "x"))
		if prop(d.Message, "stamped-by") != "a" || prop(d.Message, "inbound-at") != "b:a" || prop(d.Message, "delivered-by") != "b" {
			t.Fatalf("b's consumer got properties %v", d.Properties)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	receive(t, consumer(t, a, "y")).Ack()
	petreltest.Eventually(t, "the hooks of every path seen", func() bool {
		return atA.has("nack embedded later") && atA.has("ack embedded") && atB.has("publish link") &&
			atB.has("deliver embedded") && atB.has("deliver client") && atB.has("ack embedded") && atB.has("ack client") &&
			atB.has("connect a link") && atB.has("subscribe x client")
	}, func() string { return fmt.Sprintf("a saw %q, b saw %q", atA.seen(), atB.seen()) })
}

// TestInterceptLinkRefusalIsDeadLettered: B's inbound refusal is a
// refusal for good, which A dead-letters with the reason.
func TestInterceptLinkRefusalIsDeadLettered(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withInterceptors(&hooks{name: "b", publish: blockFlagged}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	m := a.Producer().CreateDataMessage("x@b")
	m.Properties.Set("block", message.String("yes"))
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := receive(t, consumer(t, a, "x.dlq"))
	if !strings.Contains(d.Reason, errBlocked.Error()) {
		t.Fatalf("dead letter reason %q, want the interceptor's", d.Reason)
	}
	d.Ack()
	if st := b.ReceiverStats(); st.Stored != 0 || st.Refused != 1 {
		t.Fatalf("b's receiver: %+v", st)
	}
}

// TestManyRefusalsInARowAllReachTheSender: each refusal is an entry of
// the session's queue of operations awaiting their commit, which holds
// far fewer than the window; a window's worth of refusals in a row makes
// the receiver wait for the queue, and every one still reaches A, which
// dead-letters it.
func TestManyRefusalsInARowAllReachTheSender(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withInterceptors(&hooks{name: "b", publish: blockFlagged}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	const total = 1500 // past the queue's 256 entries, within the window
	p := a.Producer()
	pending := make([]*petrel.Pending, 0, total)
	for i := range total {
		m := p.CreateDataMessage("x@b")
		m.Body = []byte(fmt.Sprint(i))
		m.Properties.Set("block", message.String("yes"))
		pending = append(pending, p.SendAsync(m))
	}
	for _, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c := consumer(t, a, "x.dlq")
	for i := range total {
		d := receive(t, c)
		if !strings.Contains(d.Reason, errBlocked.Error()) {
			t.Fatalf("dead letter %d: reason %q, want the interceptor's", i, d.Reason)
		}
		d.Ack()
	}
	if st := b.ReceiverStats(); st.Stored != 0 || st.Refused != total {
		t.Fatalf("b's receiver: %+v, want %d refused", st, total)
	}
}

// panicky panics on every publish.
type panicky struct{ petrel.NopInterceptor }

func (panicky) OnPublish(context.Context, *message.Message, petrel.ConnInfo) error {
	panic("interceptor bug")
}

// TestInterceptPanicIsARefusal: a panicking interceptor refuses, and the
// node keeps serving: the chain stops at it, and the next publish and
// the other hooks still run.
func TestInterceptPanicIsARefusal(t *testing.T) {
	after := &hooks{name: "after"}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withInterceptors(panicky{}, after),
		nodes.With(withAdmin))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	for range 3 {
		err := c.Producer().Send(context.Background(), c.Producer().CreateDataMessage("orders"))
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("client send: %v, want a refusal saying it panicked", err)
		}
	}
	err := n.Producer().Send(context.Background(), n.Producer().CreateDataMessage("orders"))
	if !errors.Is(err, petrel.ErrIntercepted) {
		t.Fatalf("embedded send: %v, want ErrIntercepted", err)
	}
	if after.has("publish client") || after.has("publish embedded") {
		t.Fatalf("the chain went on past a panic: %q", after.seen())
	}
	cons := consumer(t, c, "orders") // the node still serves the client
	cons.Close()
	m := scrape(t, n)
	if m[`petrel_interceptor_refusals_total{hook="publish"}`] != 4 || m[`petrel_interceptor_duration_seconds_count{hook="publish"}`] != 4 {
		t.Fatalf("metrics: refusals %v, publishes timed %v", m[`petrel_interceptor_refusals_total{hook="publish"}`],
			m[`petrel_interceptor_duration_seconds_count{hook="publish"}`])
	}
	if m[`petrel_interceptor_duration_seconds_count{hook="subscribe"}`] < 1 {
		t.Fatalf("the subscribe hook was not timed")
	}
}

// TestInterceptOrder: interceptors run in registration order, Config's
// before the fx group's (registered with fxtest), and the first refusal
// stops the chain.
func TestInterceptOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	step := func(name string) *hooks {
		return &hooks{name: name, publish: func(m *message.Message, from petrel.ConnInfo) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if name == "second" {
				return blockFlagged(m, from)
			}
			return nil
		}}
	}
	var n *petrel.Node
	cfg := petrel.Config{Name: "plant-7", DataDir: t.TempDir(), Logger: nodes.Quiet,
		Interceptors: []petrel.Interceptor{step("first"), step("second"), step("third")}}
	app := fxtest.New(t, fx.Supply(cfg), petrel.Module, fx.Populate(&n), fx.NopLogger,
		fx.Provide(fx.Annotate(func() petrel.Interceptor { return step("grouped") }, fx.ResultTags(`group:"petrel.interceptors"`))),
	)
	app.RequireStart()
	defer app.RequireStop()
	p := n.Producer()
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := order
		order = nil
		return got
	}
	if err := p.Send(context.Background(), p.CreateDataMessage("orders")); err != nil {
		t.Fatal(err)
	}
	if got := taken(); !slices.Equal(got, []string{"first", "second", "third", "grouped"}) {
		t.Fatalf("order %q, want Config's in order, then the fx group's", got)
	}
	m := p.CreateDataMessage("orders")
	m.Properties.Set("block", message.String("yes"))
	if err := p.Send(context.Background(), m); !errors.Is(err, errBlocked) {
		t.Fatalf("send: %v, want the second interceptor's refusal", err)
	}
	if got := taken(); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("order %q, want first, second: the refusal stops the chain", got)
	}
}

// BenchmarkInterceptNone and BenchmarkInterceptOne measure a send with no
// interceptor and with one that does nothing.
func BenchmarkInterceptNone(b *testing.B) { benchSend(b) }
func BenchmarkInterceptOne(b *testing.B)  { benchSend(b, petrel.NopInterceptor{}) }

func benchSend(b *testing.B, is ...petrel.Interceptor) {
	n := nodes.Open(b, withInterceptors(is...), nodes.With(func(c *petrel.Config) { c.Store.Sync = queue.SyncNormal }))
	p := n.Producer()
	ctx := context.Background()
	b.ResetTimer()
	var pend []*petrel.Pending
	for i := range b.N {
		pend = append(pend, p.SendAsync(p.CreateDataMessage("bench")))
		if i%1000 == 999 {
			for _, pd := range pend {
				pd.Wait(ctx)
			}
			pend = pend[:0]
		}
	}
	for _, pd := range pend {
		pd.Wait(ctx)
	}
	b.StopTimer()
}

// TestInterceptTopicSubscription: a topic subscription passes through the
// interceptors like an address's consumer: a refused one is ended (its
// queue gone), an allowed one has its deliveries and acks seen.
func TestInterceptTopicSubscription(t *testing.T) {
	refuse := true
	h := &hooks{name: "n", subscribe: func(petrel.SubscribeInfo) error {
		if refuse {
			return errBlocked
		}
		return nil
	}}
	n := nodes.Open(t, withTopics("orders.#"), withInterceptors(h))
	ctx := context.Background()
	if _, err := n.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "audit"}); !errors.Is(err, petrel.ErrIntercepted) {
		t.Fatalf("refused subscribe: %v, want ErrIntercepted", err)
	}
	if subs := n.Subscriptions(); len(subs) != 0 {
		t.Fatalf("a refused non-durable subscription stayed: %+v", subs)
	}
	refuse = false
	c := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "audit"})
	publish(t, n, "orders.eu", "one", nil)
	d, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := prop(d.Message, "delivered-by"); got != "n" {
		t.Fatalf("delivery property %q, want the interceptor's", got)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the ack seen", func() bool { return h.has("ack embedded") }, func() string { return fmt.Sprint(h.seen()) })
}

// TestInterceptBatchDeliveries: every delivery of a ReceiveBatch passes
// OnDeliver, as one from Receive does, and each ack of one OnAck.
func TestInterceptBatchDeliveries(t *testing.T) {
	h := &hooks{name: "n"}
	n := nodes.Open(t, withInterceptors(h))
	c, err := n.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		m := n.Producer().CreateDataMessage("orders")
		m.Body = []byte(fmt.Sprint("m", i))
		if err := n.Producer().Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := c.ReceiveBatch(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 {
		t.Fatalf("a batch of %d, want the 3 stored", len(ds))
	}
	for _, d := range ds {
		if got := prop(d.Message, "delivered-by"); got != "n" {
			t.Fatalf("%s: delivery property %q, want the interceptor's", d.Body, got)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(e string) int {
		k := 0
		for _, s := range h.seen() {
			if s == e {
				k++
			}
		}
		return k
	}
	petreltest.Eventually(t, "three acks seen", func() bool { return count("ack embedded") == 3 }, func() string { return fmt.Sprint(h.seen()) })
	if k := count("deliver embedded"); k != 3 {
		t.Fatalf("%d deliveries seen, want 3: %v", k, h.seen())
	}
}
