package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The conformance suite runs every case against every way of producing
// and consuming: the embedded API of a node in this process, a remote
// Client dialed to a node over loopback TCP, and one over mutual TLS. An
// application that switches from one to the other sees the same
// behaviour.

// endpointKind says how a case reaches its node.
type endpointKind struct {
	name   string
	remote bool
	tls    bool // mutual TLS: the node verifies the client's certificate
}

var endpointKinds = []endpointKind{{"embedded", false, false}, {"remote", true, false}, {"remote-tls", true, true}}

// open starts a node named plant-7, with mod applied to its configuration,
// and returns it and the Endpoint to produce and consume through: the node
// itself, or a Client of it.
func (k endpointKind) open(t *testing.T, mod func(*petrel.Config)) (*petrel.Node, petrel.Endpoint) {
	t.Helper()
	var ca *testCA
	if k.tls {
		ca = newCA(t, "ca")
	}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Store = queue.Config{SweepInterval: 20 * time.Millisecond}
		if k.tls {
			c.TLS = ca.nodeTLS(t, "plant-7", ca, petrel.ClientAuthRequireAndVerify)
		}
		if mod != nil {
			mod(c)
		}
	}))
	if !k.remote {
		return n, n
	}
	var opts petrel.DialOptions
	if k.tls {
		cfg, err := ca.nodeTLS(t, "app-1", ca, "").ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		opts.TLS = cfg
	}
	return n, nodes.Dial(t, n, opts)
}

func consumer(t *testing.T, ep petrel.Endpoint, addr string) *petrel.Consumer {
	t.Helper()
	c, err := ep.Consumer(addr)
	if err != nil {
		t.Fatalf("consumer of %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, k endpointKind)
	}{
		{"SendReceiveKindsAndProperties", conformSendReceive},
		{"SendAsyncThousandsInFlight", conformSendAsync},
		{"PollAndReceiveDeadline", conformPollReceive},
		{"ReceiveAndPollBatches", conformBatch},
		{"ListenAckNackPanic", conformListen},
		{"NackIsRedelivered", conformNack},
		{"LeaseExpiryRedelivers", conformLeaseExpiry},
		{"CloseGivesBackToAnotherConsumer", conformCloseGivesBack},
		{"CloseStopsTheConsumer", conformCloseStops},
		{"RefusedSendAndConsumer", conformRefused},
		{"PriorityOrderFIFOWithin", conformPriority},
		{"TTLExpiresBeforeConsumption", conformTTL},
		{"TopicFanOut", conformTopicFanOut},
		{"TopicDurableAcrossConsumerClose", conformTopicDurable},
		{"TopicSharedSubscription", conformTopicShared},
		{"TopicNonDurableCleanup", conformTopicNonDurable},
		{"TopicRefused", conformTopicRefused},
		{"TopicBatches", conformTopicBatch},
	}
	for _, k := range endpointKinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, k) })
			}
		})
	}
}

func conformSendReceive(t *testing.T, k endpointKind) {
	_, ep := k.open(t, nil)
	p := ep.Producer()
	ctx := context.Background()
	cmd := p.CreateCommandMessage("orders")
	cmd.Command = message.CommandProps{Command: "start", ReplyTo: "replies@plant-7", CorrelationID: "c-1"}
	cmd.TTL = time.Hour
	for _, kv := range []struct {
		k string
		v message.Value
	}{
		{"bool", message.Bool(true)}, {"byte", message.Byte(7)}, {"bytes", message.Bytes([]byte{0, 1, 2})},
		{"int16", message.Int16(-3)}, {"int32", message.Int32(1 << 20)}, {"int64", message.Int64(-1 << 40)},
		{"float32", message.Float32(1.5)}, {"float64", message.Float64(-2.25)}, {"string", message.String("é")},
	} {
		cmd.Properties.Set(kv.k, kv.v)
	}
	data := p.CreateDataMessage("orders@plant-7")
	data.Data = message.DataProps{DataType: "reading", Encoding: "json"}
	data.Body = []byte(`{"t":21.5}`)
	for _, m := range []*message.Message{cmd, data} {
		if m.ID == 0 || m.Origin.IsZero() || m.Priority != message.DefaultPriority || m.Timestamp.IsZero() {
			t.Fatalf("factory left the header unset: %+v", m)
		}
		if err := p.Send(ctx, m); err != nil {
			t.Fatalf("send %s: %v", m.Kind, err)
		}
	}
	c := consumer(t, ep, "orders")
	for _, want := range []*message.Message{cmd, data} {
		d := receive(t, c)
		if d.ID != want.ID || d.Origin != want.Origin || d.Kind != want.Kind || d.Command != want.Command ||
			d.Data != want.Data || string(d.Body) != string(want.Body) || !d.Timestamp.Equal(want.Timestamp) || d.Attempt != 1 {
			t.Fatalf("got %+v attempt %d, want %+v", d.Message, d.Attempt, want)
		}
		for _, p := range want.Properties {
			if v, ok := d.Properties.Get(p.Key); !ok || v.Type() != p.Value.Type() || v.String() != p.Value.String() {
				t.Fatalf("property %s: got %v, want %v", p.Key, v, p.Value)
			}
		}
		if want.TTL > 0 && (d.TTL <= 0 || d.TTL > want.TTL) {
			t.Fatalf("TTL %v, want the time that remains of %v", d.TTL, want.TTL)
		}
		if err := c.Ack(d); err != nil {
			t.Fatal(err)
		}
	}
	if k.remote {
		f := p.CreateFileMessage("orders")
		f.File.SendFilePath = "/etc/hostname"
		if err := p.Send(ctx, f); err == nil {
			t.Fatal("a remote client sent a file message")
		}
	}
}

func conformSendAsync(t *testing.T, k endpointKind) {
	_, ep := k.open(t, nil)
	p := ep.Producer()
	const total = 3000
	pending := make([]*petrel.Pending, 0, total)
	for i := range total {
		m := p.CreateDataMessage("bulk")
		m.Body = []byte(fmt.Sprint(i))
		pending = append(pending, p.SendAsync(m))
	}
	for _, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pd.Done():
		default:
			t.Fatal("Wait returned before Done closed")
		}
		if pd.Err() != nil {
			t.Fatal(pd.Err())
		}
	}
	c := consumer(t, ep, "bulk")
	for i := range total {
		d := receive(t, c)
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d out of order: %q", i, d.Body)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := c.Poll(); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll of a drained address: %v %v", d, err)
	}
}

func conformPollReceive(t *testing.T, k endpointKind) {
	_, ep := k.open(t, nil)
	c := consumer(t, ep, "orders")
	if _, err := c.Poll(); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll of an empty address: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive past its deadline: %v", err)
	}
	// Receive blocks until a message arrives.
	got := make(chan *petrel.Delivery, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, _ := c.Receive(ctx)
		got <- d
	}()
	p := ep.Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte("late")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if d := <-got; d == nil || string(d.Body) != "late" {
		t.Fatalf("blocked receive got %v", d)
	} else {
		d.Ack()
	}
	// Poll finds a message once it is ready (for a remote consumer, once
	// the node pushed it).
	m = p.CreateDataMessage("orders")
	m.Body = []byte("polled")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var d *petrel.Delivery
	petreltest.Eventually(t, "a message to poll", func() bool {
		var err error
		d, err = c.Poll()
		if err != nil && !errors.Is(err, petrel.ErrNoMessage) {
			t.Fatalf("poll: %v", err)
		}
		return err == nil
	})
	if string(d.Body) != "polled" {
		t.Fatalf("polled %q", d.Body)
	}
	d.Ack()
}

func conformListen(t *testing.T, k endpointKind) {
	_, ep := k.open(t, func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{RedeliveryDelay: time.Millisecond, MaxDeliveries: 3}}}
	})
	p := ep.Producer()
	for _, b := range []string{"ok", "fail-once", "panic-once", "poison"} {
		m := p.CreateCommandMessage("jobs")
		m.Body = []byte(b)
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	c := consumer(t, ep, "jobs")
	var mu sync.Mutex
	attempts := map[string][]int{}
	done := make(chan struct{})
	var once sync.Once
	l, err := c.Listen(func(ctx context.Context, d *petrel.Delivery) error {
		mu.Lock()
		attempts[string(d.Body)] = append(attempts[string(d.Body)], d.Attempt)
		a := len(attempts[string(d.Body)])
		finished := len(attempts["ok"]) == 1 && len(attempts["fail-once"]) == 2 && len(attempts["panic-once"]) == 2 && len(attempts["poison"]) == 3
		mu.Unlock()
		if finished {
			defer once.Do(func() { close(done) })
		}
		switch {
		case string(d.Body) == "fail-once" && a == 1:
			return errors.New("transient")
		case string(d.Body) == "panic-once" && a == 1:
			panic("boom")
		case string(d.Body) == "poison":
			return errors.New("cannot parse")
		}
		return nil
	}, petrel.ListenOptions{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		mu.Lock()
		t.Fatalf("listener did not finish: %v", attempts)
	}
	l.Stop()
	handled, failed, panics := l.Counts()
	if handled != 3 || failed != 5 || panics != 1 {
		t.Fatalf("counts handled=%d failed=%d panics=%d, want 3 5 1", handled, failed, panics)
	}
	mu.Lock()
	if fmt.Sprint(attempts["fail-once"]) != "[1 2]" || fmt.Sprint(attempts["poison"]) != "[1 2 3]" {
		t.Fatalf("attempts: %v", attempts)
	}
	mu.Unlock()
	d := receive(t, consumer(t, ep, "jobs.dlq"))
	if string(d.Body) != "poison" || d.Reason == "" {
		t.Fatalf("dead letter %q reason %q", d.Body, d.Reason)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

func conformNack(t *testing.T, k endpointKind) {
	// A lease timeout of an hour: the redelivery within the test's patience
	// comes from the nack, not from the lease running out.
	_, ep := k.open(t, func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{RedeliveryDelay: time.Millisecond, LeaseTimeout: time.Hour}}}
	})
	p := ep.Producer()
	m := p.CreateDataMessage("jobs")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, ep, "jobs")
	d := receive(t, c)
	if err := c.Nack(d, "try later"); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); !errors.Is(err, petrel.ErrLeaseLost) {
		t.Fatalf("ack after nack: %v, want ErrLeaseLost", err)
	}
	d2 := receive(t, c)
	if d2.ID != m.ID || d2.Attempt != 2 {
		t.Fatalf("redelivered %d attempt %d, want %d attempt 2", d2.ID, d2.Attempt, m.ID)
	}
	if err := d2.Ack(); err != nil {
		t.Fatal(err)
	}
}

func conformLeaseExpiry(t *testing.T, k endpointKind) {
	_, ep := k.open(t, func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{LeaseTimeout: 200 * time.Millisecond}}}
	})
	p := ep.Producer()
	m := p.CreateDataMessage("jobs")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, ep, "jobs")
	d := receive(t, c) // and never settled: its lease runs out
	d2 := receive(t, c)
	if d2.ID != m.ID || d2.Attempt != 2 || d.Attempt != 1 {
		t.Fatalf("redelivered %d attempt %d after attempt %d, want %d attempt 2", d2.ID, d2.Attempt, d.Attempt, m.ID)
	}
	if err := d2.Ack(); err != nil {
		t.Fatal(err)
	}
}

func conformCloseGivesBack(t *testing.T, k endpointKind) {
	// A consumer gives back on Close what it took and did not settle:
	// with a lease timeout of an hour, the message can come back within
	// the test's patience only from that give-back.
	_, ep := k.open(t, func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{LeaseTimeout: time.Hour}}}
	})
	p := ep.Producer()
	var ids []uint64
	for _, b := range []string{"one", "two", "three"} {
		m := p.CreateDataMessage("jobs")
		m.Body = []byte(b)
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	c1 := consumer(t, ep, "jobs")
	d1 := receive(t, c1)
	d2 := receive(t, c1)
	d3 := receive(t, c1)
	if err := d1.Ack(); err != nil { // settled before Close: stays settled
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	// Given back at once, in their order, without counting an attempt;
	// settling them afterwards is ErrClosed, and does not take them back
	// from the consumer that has them now.
	if err := d2.Ack(); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("ack of a delivery given back at close: %v, want ErrClosed", err)
	}
	if err := d3.Nack("late"); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("nack of a delivery given back at close: %v, want ErrClosed", err)
	}
	c2 := consumer(t, ep, "jobs")
	for _, want := range []*petrel.Delivery{d2, d3} {
		got := receive(t, c2)
		if got.ID != want.ID || got.Attempt != 1 {
			t.Fatalf("another consumer got %d attempt %d, want %d attempt 1 (of %v)", got.ID, got.Attempt, want.ID, ids)
		}
		if err := got.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// d1 was acked before Close, and is not delivered again.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if d, err := c2.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the two given back: %v %v, want nothing", d, err)
	}
}

// conformCloseStops: a closed consumer takes nothing more. A Receive and a
// ReceiveBatch blocked in it return ErrClosed, its listener stops, every
// way of taking from it afterwards is ErrClosed, and a message sent after
// Close goes to a live consumer, never to the closed one.
func conformCloseStops(t *testing.T, k endpointKind) {
	_, ep := k.open(t, func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{LeaseTimeout: time.Hour}}}
	})
	c := consumer(t, ep, "jobs")
	// Receivers blocked with no deadline of their own: only Close ends them.
	errs := make(chan error, 2)
	go func() {
		d, err := c.Receive(context.Background())
		if err == nil {
			err = fmt.Errorf("receive got message %d", d.ID)
		}
		errs <- err
	}()
	go func() {
		ds, err := c.ReceiveBatch(context.Background(), 8)
		if err == nil {
			err = fmt.Errorf("receive batch got %d messages", len(ds))
		}
		errs <- err
	}()
	var calls sync.Mutex
	called := 0
	l, err := c.Listen(func(context.Context, *petrel.Delivery) error {
		calls.Lock()
		called++
		calls.Unlock()
		return nil
	}, petrel.ListenOptions{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Blocked by now, most likely; one that is not yet blocked meets the
	// closed consumer, which the test checks too.
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, petrel.ErrClosed) {
				t.Fatalf("blocked receive after Close: %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a receive blocked in the consumer still blocks 5s after Close")
		}
	}
	stopped := make(chan struct{})
	go func() { l.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop of the closed consumer's listener did not return")
	}

	p := ep.Producer()
	m := p.CreateDataMessage("jobs")
	m.Body = []byte("for a live consumer")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// With a lease of an hour, the live consumer gets it within the
	// test's patience only if the closed one took nothing.
	if d := receive(t, consumer(t, ep, "jobs")); d.ID != m.ID || d.Attempt != 1 {
		t.Fatalf("live consumer got %d attempt %d, want %d attempt 1", d.ID, d.Attempt, m.ID)
	} else if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	calls.Lock()
	if called != 0 {
		t.Fatalf("the closed consumer's listener handled %d messages", called)
	}
	calls.Unlock()

	if _, err := c.Poll(); !errors.Is(err, petrel.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if _, err := c.PollBatch(8); !errors.Is(err, petrel.ErrClosed) {
		t.Errorf("PollBatch after Close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Receive(ctx); !errors.Is(err, petrel.ErrClosed) {
		t.Errorf("Receive after Close: %v, want ErrClosed", err)
	}
	if _, err := c.ReceiveBatch(ctx, 8); !errors.Is(err, petrel.ErrClosed) {
		t.Errorf("ReceiveBatch after Close: %v, want ErrClosed", err)
	}
	if l, err := c.Listen(func(context.Context, *petrel.Delivery) error { return nil }, petrel.ListenOptions{}); !errors.Is(err, petrel.ErrClosed) {
		if l != nil {
			l.Stop()
		}
		t.Errorf("Listen after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func conformRefused(t *testing.T, k endpointKind) {
	n, ep := k.open(t, func(c *petrel.Config) {
		c.NoAutoCreate = true
		c.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleReceive}}
	})
	p := ep.Producer()
	ctx := context.Background()
	for _, dest := range []string{"nope", "orders@plant-9"} {
		m := p.CreateDataMessage(dest)
		err := p.Send(ctx, m)
		if err == nil || !errors.Is(err, petrel.ErrUnknownAddress) && !errors.Is(err, petrel.ErrNoRoute) && !errors.Is(err, petrel.ErrRefused) {
			t.Fatalf("send to %s: %v", dest, err)
		}
		if k.remote && !errors.Is(err, petrel.ErrRefused) {
			t.Fatalf("remote send to %s: %v, want ErrRefused", dest, err)
		}
		if err := p.SendAsync(p.CreateDataMessage(dest)).Wait(ctx); err == nil {
			t.Fatalf("async send to %s succeeded", dest)
		}
	}
	bad := p.CreateDataMessage("orders")
	bad.Priority = 12
	if err := p.Send(ctx, bad); !errors.Is(err, message.ErrPriority) {
		t.Fatalf("send of priority 12: %v", err)
	}
	if _, err := ep.Consumer("nope"); err == nil {
		t.Fatal("consumer of an undeclared address")
	}
	// The connection is still good, and nothing was stored.
	if err := p.Send(ctx, p.CreateDataMessage("orders")); err != nil {
		t.Fatal(err)
	}
	if st, _ := n.QueueStat("orders"); st.Depth != 1 || len(n.QueueStats()) != 1 {
		t.Fatalf("queues after refusals: %+v", n.QueueStats())
	}
}
