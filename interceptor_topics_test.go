package petrel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// The interceptors on topics across nodes: a -> c -> b as in the interest
// tests, each node with interceptors of its own.

// openTopicNode opens node name of m with the topic space orders.#, its
// neighbours and interceptors.
func openTopicNode(t *testing.T, m mesh, name string, neighbours []string, is ...petrel.Interceptor) *petrel.Node {
	t.Helper()
	return nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), withTopics("orders.#"), withInterceptors(is...),
		nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
			for _, nb := range neighbours {
				c.Nodes = append(c.Nodes, petrel.NodeConfig{Name: nb, Connector: "tcp://" + m[nb]})
			}
		}))
}

// TestInterceptTopicPropertyOnEveryNode: a property that a's OnPublish
// adds to a publish is seen by every subscriber of it on every node: a's
// own, the relay c's, both of b's, and a client's subscription on b; and
// a property that the relay c adds where the copy enters it is seen by
// c's and b's subscribers, not by a's.
func TestInterceptTopicPropertyOnEveryNode(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	atA := &hooks{name: "a", publish: func(msg *message.Message, from petrel.ConnInfo) error {
		if from.Path == petrel.PathEmbedded {
			msg.Properties.Set("stamped-by", message.String("a"))
		}
		return nil
	}}
	atC := &hooks{name: "c", publish: func(msg *message.Message, from petrel.ConnInfo) error {
		if from.Path == petrel.PathLink {
			msg.Properties.Set("relayed-by", message.String("c:"+from.Identity))
		}
		return nil
	}}
	b := openTopicNode(t, m, "b", []string{"c"})
	c := openTopicNode(t, m, "c", []string{"a", "b"}, atC)
	a := openTopicNode(t, m, "a", []string{"c"}, atA)
	subs := map[string]*petrel.Consumer{
		"a/a1": subscribe(t, a, "orders.#", petrel.SubscribeOptions{Name: "a1", Durable: true}),
		"c/c1": subscribe(t, c, "orders.#", petrel.SubscribeOptions{Name: "c1", Durable: true}),
		"b/b1": subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "b1", Durable: true}),
		"b/b2": subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "b2", Durable: true}),
	}
	client := nodes.Dial(t, b, petrel.DialOptions{})
	remote, err := client.Subscribe(context.Background(), "orders.eu.#", petrel.SubscribeOptions{Name: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	subs["b/remote (client)"] = remote
	waitInterest(t, a, "c/b/orders.#", "c/b/orders.eu.*", "c/b/orders.eu.#", "c/c/orders.#")
	const total = 10
	bodies := publishN(t, a, "orders.eu.created", total)
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	for name, sub := range subs {
		seen := map[string]bool{}
		for len(seen) < total {
			d, err := sub.Receive(ctx)
			if err != nil {
				t.Fatalf("%s: received %d of %d: %v", name, len(seen), total, err)
			}
			if seen[string(d.Body)] {
				t.Fatalf("%s: %q arrived twice", name, d.Body)
			}
			seen[string(d.Body)] = true
			if got := prop(d.Message, "stamped-by"); got != "a" {
				t.Errorf("%s: %q has stamped-by %q, want a's stamp; properties %v", name, d.Body, got, d.Properties)
			}
			relayed, wantRelayed := prop(d.Message, "relayed-by"), "c:a"
			if strings.HasPrefix(name, "a/") {
				wantRelayed = "" // a's own copy never crossed c
			}
			if relayed != wantRelayed {
				t.Errorf("%s: %q has relayed-by %q, want %q", name, d.Body, relayed, wantRelayed)
			}
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	petreltest.Eventually(t, "the links settled", func() bool { return linksSettled([]*petrel.Node{a, c, b}) },
		func() string { return linksOf([]*petrel.Node{a, c, b}) })
	for name, sub := range subs {
		if d, err := sub.Poll(); err == nil {
			t.Errorf("%s: extra delivery %q", name, d.Body)
		}
	}
	if len(bodies) != total || !atC.has("publish link") {
		t.Fatalf("c's interceptor saw %q", atC.seen())
	}
}

// TestInterceptTopicRefusalReachesClient: b's OnPublish refuses a client's
// publish to a topic, and one of its own producer's; the client's Send is
// a refusal with the reason (ErrIntercepted for b's own), no
// subscriber on any node gets it, and the same session publishes what is
// not refused, which reaches b's and c's subscribers.
func TestInterceptTopicRefusalReachesClient(t *testing.T) {
	m := newMesh(t, "b", "c")
	atB := &hooks{name: "b", publish: blockFlagged}
	c := openTopicNode(t, m, "c", []string{"b"})
	b := openTopicNode(t, m, "b", []string{"c"}, atB)
	c1 := subscribe(t, c, "orders.#", petrel.SubscribeOptions{Name: "c1", Durable: true})
	b1 := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "b1", Durable: true})
	waitInterest(t, b, "c/c/orders.#")
	client := nodes.Dial(t, b, petrel.DialOptions{})
	p := client.Producer()
	ctx := context.Background()
	refused := p.CreateDataMessage("orders.eu.created")
	refused.Body = []byte("refused")
	refused.Properties.Set("block", message.String("yes"))
	err := p.Send(ctx, refused)
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), errBlocked.Error()) {
		t.Fatalf("client publish: %v, want ErrRefused with %q", err, errBlocked)
	}
	if err := p.SendAsync(refused).Wait(ctx); !errors.Is(err, petrel.ErrRefused) {
		t.Fatalf("client publish async: %v, want ErrRefused", err)
	}
	// b's own producer is refused the same way, with ErrIntercepted.
	local := b.Producer().CreateDataMessage("orders.eu.created")
	local.Properties.Set("block", message.String("yes"))
	if err := b.Producer().Send(ctx, local); !errors.Is(err, petrel.ErrIntercepted) || !errors.Is(err, errBlocked) {
		t.Fatalf("b's own publish: %v, want ErrIntercepted wrapping errBlocked", err)
	}
	ok := p.CreateDataMessage("orders.eu.created")
	ok.Body = []byte("allowed")
	if err := p.Send(ctx, ok); err != nil {
		t.Fatalf("the same session's next publish: %v", err)
	}
	drainSub(t, b1, []string{"allowed"}, b, c)
	drainSub(t, c1, []string{"allowed"}, b, c)
	if got := scrape(t, b)[`petrel_interceptor_refusals_total{hook="publish"}`]; got != 3 {
		t.Fatalf("b counted %v publish refusals, want 3", got)
	}
}

// panicOnBoom panics on a publish that carries the property boom.
type panicOnBoom struct{ petrel.NopInterceptor }

func (panicOnBoom) OnPublish(_ context.Context, m *message.Message, _ petrel.ConnInfo) error {
	if _, ok := m.Properties.Get("boom"); ok {
		panic("interceptor bug on boom")
	}
	return nil
}

// TestInterceptTopicPanicKeepsNodesUp: an interceptor that panics on some
// publishes, at the publisher a (a client's publish) and at the relay c
// (a copy forwarded to it), refuses them and takes no node down: the
// client gets a refusal saying it panicked, the copy c refused is
// dead-lettered at a with the reason, nobody downstream gets either, and
// the publishes around them reach every subscription on every node.
func TestInterceptTopicPanicKeepsNodesUp(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	b := openTopicNode(t, m, "b", []string{"c"})
	c := openTopicNode(t, m, "c", []string{"a", "b"}, panicOnBoom{})
	a := openTopicNode(t, m, "a", []string{"c"}, &hooks{name: "a", publish: func(msg *message.Message, from petrel.ConnInfo) error {
		if from.Path == petrel.PathClient {
			return panicOnBoom{}.OnPublish(context.Background(), msg, from)
		}
		return nil
	}})
	b1 := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "b1", Durable: true})
	c1 := subscribe(t, c, "orders.#", petrel.SubscribeOptions{Name: "c1", Durable: true})
	waitInterest(t, a, "c/b/orders.#", "c/c/orders.#")
	ctx := context.Background()

	client := nodes.Dial(t, a, petrel.DialOptions{})
	cm := client.Producer().CreateDataMessage("orders.eu.created")
	cm.Properties.Set("boom", message.Bool(true))
	if err := client.Producer().Send(ctx, cm); !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("client publish: %v, want a refusal saying the interceptor panicked", err)
	}
	publish(t, a, "orders.eu.created", "before", nil)
	// a has no such interceptor on its own producer: this one goes to c,
	// whose interceptor panics on it.
	publish(t, a, "orders.eu.created", "boom", func(msg *message.Message) { msg.Properties.Set("boom", message.Bool(true)) })
	publish(t, a, "orders.eu.created", "after", nil)
	after := client.Producer().CreateDataMessage("orders.eu.created")
	after.Body = []byte("client after")
	if err := client.Producer().Send(ctx, after); err != nil {
		t.Fatalf("the client's next publish: %v", err)
	}
	want := []string{"before", "after", "client after"}
	drainSub(t, b1, want, a, c)
	drainSub(t, c1, want, a, c)
	dl := receive(t, consumer(t, a, "_petrel.topics.dlq"))
	if string(dl.Body) != "boom" || !strings.Contains(dl.Reason, "panicked") {
		t.Fatalf("a's dead letter %q, reason %q; want boom, refused by c's panicking interceptor", dl.Body, dl.Reason)
	}
	if err := dl.Ack(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*petrel.Node{a, c} {
		if got := scrape(t, n)[`petrel_interceptor_refusals_total{hook="publish"}`]; got != 1 {
			t.Errorf("%s counted %v publish refusals, want 1", n.Name(), got)
		}
	}
}
