package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// What an interceptor may not do to a message, on every path: make it
// invalid (refused, nothing stored), or change its identity and route
// for the interceptors after it.

// madeInvalid is the text a remote sender is refused with when an
// interceptor's change made its message invalid.
const madeInvalid = "an interceptor's change made it invalid"

// breaker makes a message invalid as its body says: the changes Validate
// refuses and the wire's own checks (which the receiver ran before the
// interceptors) do not.
func breaker(m *message.Message, _ petrel.ConnInfo) error {
	switch string(m.Body) {
	case "ttl":
		m.TTL = -5 * time.Second
	case "empty-key":
		m.Properties = append(m.Properties, message.Property{Key: "", Value: message.Int32(1)})
	case "bad-utf8-key":
		m.Properties = append(m.Properties, message.Property{Key: "k\xff", Value: message.Int32(1)})
	}
	return nil
}

var breakages = []struct {
	body     string
	sentinel error
}{
	{"ttl", message.ErrTTL},
	{"empty-key", message.ErrPropertyKey},
	{"bad-utf8-key", message.ErrPropertyKey},
}

// TestInterceptInvalidChangeRefusedEmbeddedAndClient: a message an
// OnPublish interceptor made invalid is refused to the node's own Send
// and to a remote client's alike, the client told that the interceptor's
// change made it invalid and why; nothing is stored, and the client's
// session serves the next message.
func TestInterceptInvalidChangeRefusedEmbeddedAndClient(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"),
		withInterceptors(&hooks{name: "n", publish: breaker}))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	ctx := context.Background()
	for _, b := range breakages {
		lp := n.Producer()
		lm := lp.CreateDataMessage("orders")
		lm.Body = []byte(b.body)
		if err := lp.Send(ctx, lm); !errors.Is(err, b.sentinel) {
			t.Errorf("%s: embedded send: %v, want %v", b.body, err, b.sentinel)
		}
		p := c.Producer()
		m := p.CreateDataMessage("orders")
		m.Body = []byte(b.body)
		err := p.Send(ctx, m)
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), madeInvalid) ||
			!strings.Contains(err.Error(), b.sentinel.Error()) {
			t.Errorf("%s: client send: %v, want ErrRefused saying %q and %q", b.body, err, madeInvalid, b.sentinel)
		}
	}
	if st, ok := n.QueueStat("orders"); ok && st.Enqueued != 0 {
		t.Fatalf("a message made invalid was stored: %+v", st)
	}
	if got := n.ReceiverStats().Refused; got != int64(len(breakages)) {
		t.Fatalf("receiver refused %d, want %d", got, len(breakages))
	}
	p := c.Producer()
	if err := p.Send(ctx, p.CreateDataMessage("orders")); err != nil {
		t.Fatalf("a valid message after the refusals: %v", err)
	}
	d := receive(t, consumer(t, n, "orders"))
	if err := d.Message.Validate(message.Limits{}); err != nil || len(d.Body) != 0 {
		t.Fatalf("delivered %q, valid: %v; want only the valid message", d.Body, err)
	}
	d.Ack()
}

// TestInterceptInvalidChangeOnLinkIsDeadLettered: a message that b's
// OnPublish made invalid where it came in on a's link is refused for
// good; a dead-letters it with the reason, and b stores nothing.
func TestInterceptInvalidChangeOnLinkIsDeadLettered(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"),
		withInterceptors(&hooks{name: "b", publish: breaker}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	for _, br := range breakages {
		m := a.Producer().CreateDataMessage("x@b")
		m.Body = []byte(br.body)
		if err := a.Producer().Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	dlq := consumer(t, a, "x.dlq")
	for range breakages {
		d := receive(t, dlq)
		want := ""
		for _, br := range breakages {
			if string(d.Body) == br.body {
				want = br.sentinel.Error()
			}
		}
		if !strings.Contains(d.Reason, madeInvalid) || want == "" || !strings.Contains(d.Reason, want) {
			t.Fatalf("dead letter %q: reason %q, want it to say %q and %q", d.Body, d.Reason, madeInvalid, want)
		}
		d.Ack()
	}
	if st := b.ReceiverStats(); st.Stored != 0 || st.Refused != int64(len(breakages)) {
		t.Fatalf("b's receiver: %+v", st)
	}
}

// TestInterceptInvalidChangeToFileAnnouncementRefused: a file
// announcement that b's OnPublish made invalid is refused: a gives the
// file up with the reason, and b takes nothing.
func TestInterceptInvalidChangeToFileAnnouncementRefused(t *testing.T) {
	breakFiles := &hooks{name: "b", publish: func(m *message.Message, from petrel.ConnInfo) error {
		if m.Kind == message.KindFile && from.Path == petrel.PathLink {
			m.TTL = -time.Second
		}
		return nil
	}}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withInterceptors(breakFiles))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	src, _ := writeRandom(t, t.TempDir(), "report.bin", 100000)
	p := a.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "a giving the file up", func() bool {
		st, _ := petrel.FileState(a, m.ID)
		return st == filetransfer.StateFailed
	}, func() string { st, e := petrel.FileState(a, m.ID); return fmt.Sprintf("%s %s", st, e) })
	if _, e := petrel.FileState(a, m.ID); !strings.Contains(e, madeInvalid) || !strings.Contains(e, message.ErrTTL.Error()) {
		t.Fatalf("the file failed with %q; want it to say %q and %q", e, madeInvalid, message.ErrTTL)
	}
	if qs, _ := b.QueueStat("files"); qs.Enqueued != 0 || b.ReceiverStats().FilesTaken != 0 {
		t.Fatalf("b took the file: queue %+v, receiver %+v", qs, b.ReceiverStats())
	}
}

// forger changes every part of a message's identity and route, on
// publish and on delivery.
type forger struct{ petrel.NopInterceptor }

func forge(m *message.Message) {
	m.ID, m.Origin, m.Destination = 42, message.NodeID{0xf0, 0x12}, "public"
	m.Kind, m.Timestamp = message.KindCommand, time.Unix(1, 0)
	m.File.Filename = "forged.bin"
}

func (forger) OnPublish(_ context.Context, m *message.Message, _ petrel.ConnInfo) error {
	forge(m)
	return nil
}

func (forger) OnDeliver(_ context.Context, m *message.Message, _ petrel.ConnInfo) { forge(m) }

// seen is what an interceptor was shown of a message.
type seen struct {
	id     uint64
	origin message.NodeID
	dest   string
	kind   message.Kind
	ts     time.Time
	file   string
}

func seenOf(m *message.Message) seen {
	return seen{m.ID, m.Origin, m.Destination, m.Kind, m.Timestamp, m.File.Filename}
}

// guard refuses what is sent to "secret", and notes what it was shown,
// on publish and on delivery, and the acks.
type guard struct {
	petrel.NopInterceptor
	mu        sync.Mutex
	published []seen
	delivered []seen
	acked     []uint64
}

func (g *guard) OnPublish(_ context.Context, m *message.Message, _ petrel.ConnInfo) error {
	g.mu.Lock()
	g.published = append(g.published, seenOf(m))
	g.mu.Unlock()
	if m.Destination == "secret" {
		return errBlocked
	}
	return nil
}

func (g *guard) OnDeliver(_ context.Context, m *message.Message, _ petrel.ConnInfo) {
	g.mu.Lock()
	g.delivered = append(g.delivered, seenOf(m))
	g.mu.Unlock()
}

func (g *guard) OnAck(a petrel.AckInfo) {
	g.mu.Lock()
	g.acked = append(g.acked, a.ID)
	g.mu.Unlock()
}

func (g *guard) take() (pub, del []seen, acked []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pub, del, acked = g.published, g.delivered, g.acked
	g.published, g.delivered, g.acked = nil, nil, nil
	return pub, del, acked
}

// TestInterceptIdentityUndoneBeforeTheNext: an interceptor's change to a
// message's identity and route is undone before the next interceptor
// runs, not only after the chain: a policy after an enriching one
// decides on the message's own destination, on the embedded path and a
// client's, and an observer of deliveries sees the message's own id,
// as OnAck does.
func TestInterceptIdentityUndoneBeforeTheNext(t *testing.T) {
	g := &guard{}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withInterceptors(forger{}, g))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	ctx := context.Background()
	own := func(m *message.Message) seen {
		// The timestamp as the wire carries it; file properties are
		// encoded for file messages only.
		return seen{m.ID, m.Origin, m.Destination, m.Kind, m.Timestamp, ""}
	}
	for path, p := range map[string]*petrel.Producer{"embedded": n.Producer(), "client": c.Producer()} {
		m := p.CreateDataMessage("secret")
		err := p.Send(ctx, m)
		if !errors.Is(err, petrel.ErrIntercepted) && !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), errBlocked.Error()) {
			t.Errorf("%s: send to secret: %v, want the guard's refusal", path, err)
		}
		pub, _, _ := g.take()
		if len(pub) != 1 || !pub[0].ts.Equal(m.Timestamp) {
			t.Fatalf("%s: the guard saw %+v, want the message's own %+v", path, pub, own(m))
		}
		pub[0].ts = m.Timestamp
		if pub[0] != own(m) {
			t.Errorf("%s: the guard saw %+v, want the message's own %+v", path, pub[0], own(m))
		}
	}
	if st, ok := n.QueueStat("secret"); ok && st.Enqueued != 0 {
		t.Fatalf("a refused message was stored in secret: %+v", st)
	}

	p := n.Producer()
	m := p.CreateDataMessage("open")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []petrel.Endpoint{n, c} {
		cons := consumer(t, ep, "open")
		d := receive(t, cons)
		if d.ID != m.ID || d.Origin != m.Origin || d.Destination != "open" || d.Kind != message.KindData {
			t.Fatalf("%T: delivered id %d origin %v destination %q kind %s; want the stored %d %v open data",
				ep, d.ID, d.Origin, d.Destination, d.Kind, m.ID, m.Origin)
		}
		if err := d.Nack("again"); err != nil {
			t.Fatal(err)
		}
		cons.Close()
	}
	petreltest.Eventually(t, "both nacks seen", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.acked) == 2
	}, func() string { _, _, a := g.take(); return fmt.Sprint(a) })
	_, del, acked := g.take()
	if len(del) != 2 {
		t.Fatalf("the guard saw %d deliveries, want 2", len(del))
	}
	for i, s := range del {
		if s.id != m.ID || s.origin != m.Origin || s.dest != "open" || s.kind != message.KindData || s.file != "" {
			t.Errorf("delivery %d: the guard saw %+v, want the stored message's identity", i, s)
		}
	}
	for i, id := range acked {
		if id != m.ID {
			t.Errorf("ack %d: OnAck saw id %d, want the stored %d", i, id, m.ID)
		}
	}
}

// panickyForger changes a message's identity and route, then panics: on
// publish for the body "panic", on every delivery.
type panickyForger struct{ petrel.NopInterceptor }

func (panickyForger) OnPublish(_ context.Context, m *message.Message, _ petrel.ConnInfo) error {
	if string(m.Body) == "panic" {
		forge(m)
		panic("forger bug")
	}
	return nil
}

func (panickyForger) OnDeliver(_ context.Context, m *message.Message, _ petrel.ConnInfo) {
	forge(m)
	panic("forger bug")
}

// TestInterceptIdentityUndoneAfterAPanic: an interceptor that changed a
// message's identity and then panicked leaves no change behind: the
// refused sender's message and the delivered copy are the message's own.
func TestInterceptIdentityUndoneAfterAPanic(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withInterceptors(panickyForger{}))
	ctx := context.Background()
	p := n.Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte("panic")
	id := m.ID
	err := p.Send(ctx, m)
	if !errors.Is(err, petrel.ErrIntercepted) || !strings.Contains(err.Error(), `send to "orders"`) {
		t.Fatalf("send: %v, want a refusal of the send to orders", err)
	}
	if m.Destination != "orders" || m.Kind != message.KindData || m.File.Filename != "" || (id != 0 && m.ID != id) {
		t.Fatalf("the refused message was left changed: id %d destination %q kind %s file %q", m.ID, m.Destination, m.Kind, m.File.Filename)
	}
	m = p.CreateDataMessage("orders")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []petrel.Endpoint{n, nodes.Dial(t, n, petrel.DialOptions{})} {
		cons := consumer(t, ep, "orders")
		d := receive(t, cons)
		if d.ID != m.ID || d.Origin != m.Origin || d.Destination != "orders" || d.Kind != message.KindData {
			t.Fatalf("%T: delivered id %d origin %v destination %q kind %s; want the stored %d %v orders data",
				ep, d.ID, d.Origin, d.Destination, d.Kind, m.ID, m.Origin)
		}
		if err := d.Nack("again"); err != nil {
			t.Fatal(err)
		}
		cons.Close()
	}
}
