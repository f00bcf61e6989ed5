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
	"github.com/petrelmq/petrel/internal/petreltest"
)

// The topic cases of the conformance suite: Endpoint.Subscribe behaves
// the same on an embedded node and through a Client, over TCP and TLS.

// openTopics opens k's node with the topic space orders.#.
func openTopics(t *testing.T, k endpointKind) (*petrel.Node, petrel.Endpoint) {
	t.Helper()
	return k.open(t, func(c *petrel.Config) {
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#"}}
	})
}

func epSubscribe(t *testing.T, ep petrel.Endpoint, pattern string, opts petrel.SubscribeOptions) *petrel.Consumer {
	t.Helper()
	c, err := ep.Subscribe(context.Background(), pattern, opts)
	if err != nil {
		t.Fatalf("subscribe %q as %+v: %v", pattern, opts, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func epPublish(t *testing.T, ep petrel.Endpoint, topic, body string) {
	t.Helper()
	p := ep.Producer()
	m := p.CreateDataMessage(topic)
	m.Body = []byte(body)
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatalf("publish %q to %q: %v", body, topic, err)
	}
}

// expectBodies receives len(want) deliveries from c, acking each, and
// checks they are want in order.
func expectBodies(t *testing.T, c *petrel.Consumer, what string, want ...string) {
	t.Helper()
	for i, w := range want {
		d := receive(t, c)
		if string(d.Body) != w {
			t.Fatalf("%s: delivery %d is %q, want %q", what, i, d.Body, w)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("%s: ack %q: %v", what, w, err)
		}
	}
}

// subscriptionInfo returns the node's subscription called name.
func subscriptionInfo(n *petrel.Node, name string) (petrel.SubscriptionInfo, bool) {
	for _, s := range n.Subscriptions() {
		if s.Name == name {
			return s, true
		}
	}
	return petrel.SubscriptionInfo{}, false
}

// conformTopicFanOut: every subscription whose pattern matches gets each
// publish once, in order; one that does not match gets none of it. The
// marker published last proves nothing came twice in between.
func conformTopicFanOut(t *testing.T, k endpointKind) {
	_, ep := openTopics(t, k)
	const subs, msgs = 4, 20
	var matching []*petrel.Consumer
	for i := range subs {
		matching = append(matching, epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{Name: fmt.Sprint("s", i), Durable: true}))
	}
	matching = append(matching,
		epSubscribe(t, ep, "orders.*.created", petrel.SubscribeOptions{}),
		epSubscribe(t, ep, "orders.eu.*", petrel.SubscribeOptions{Name: "eu"}))
	other := epSubscribe(t, ep, "orders.us.#", petrel.SubscribeOptions{Name: "us", Durable: true})
	var want []string
	for i := range msgs {
		want = append(want, fmt.Sprint("m", i))
		epPublish(t, ep, "orders.eu.created", want[i])
	}
	epPublish(t, ep, "orders.us.created", "marker")
	for i, c := range matching {
		expectBodies(t, c, fmt.Sprint("subscription ", i), want...)
	}
	expectBodies(t, other, "orders.us.#", "marker")
	for i, c := range matching[:subs+1] {
		// orders.# and orders.*.created match the marker too: it comes
		// right after the 20, so no copy came twice.
		expectBodies(t, c, fmt.Sprint("subscription ", i), "marker")
	}
}

// conformTopicDurable: a durable subscription keeps what is published
// while no consumer is attached, and a consumer that joins it again gets
// it, in order, after what it acked before.
func conformTopicDurable(t *testing.T, k endpointKind) {
	n, ep := openTopics(t, k)
	opts := petrel.SubscribeOptions{Name: "audit", Durable: true}
	c := epSubscribe(t, ep, "orders.#", opts)
	epPublish(t, ep, "orders.a", "before")
	expectBodies(t, c, "first consumer", "before")
	c.Close()
	petreltest.Eventually(t, "the closed consumer to leave the subscription", func() bool {
		s, ok := subscriptionInfo(n, "audit")
		return ok && s.Consumers == 0
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	for i := range 5 {
		epPublish(t, ep, "orders.b", fmt.Sprint("while-away-", i))
	}
	// A remote Send returns once the node stored the message; the depth
	// shown may follow a moment later.
	petreltest.Eventually(t, "the durable subscription to hold the 5 published while no consumer was attached", func() bool {
		s, ok := subscriptionInfo(n, "audit")
		return ok && s.Durable && s.Depth == 5
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	c = epSubscribe(t, ep, "orders.#", opts)
	expectBodies(t, c, "second consumer", "while-away-0", "while-away-1", "while-away-2", "while-away-3", "while-away-4")
	// The same name with another pattern or durability is not the same
	// subscription: refused.
	if _, err := ep.Subscribe(context.Background(), "orders.x.#", opts); !isRefusal(k, err, petrel.ErrSubscription) {
		t.Fatalf("subscribe as audit with another pattern: %v, want ErrSubscription", err)
	}
}

// conformTopicShared: the consumers of one subscription compete, each
// message going to one of them; another subscription still gets all.
func conformTopicShared(t *testing.T, k endpointKind) {
	n, ep := openTopics(t, k)
	shared := petrel.SubscribeOptions{Name: "workers", Durable: true}
	cs := []*petrel.Consumer{epSubscribe(t, ep, "orders.#", shared), epSubscribe(t, ep, "orders.#", shared)}
	all := epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if s, _ := subscriptionInfo(n, "workers"); s.Consumers != 2 {
		t.Fatalf("shared subscription has %d consumers, want 2", s.Consumers)
	}
	const total = 40
	var want []string
	for i := range total {
		want = append(want, fmt.Sprint(i))
		epPublish(t, ep, "orders.job", want[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for {
				d, err := c.Receive(ctx)
				if err != nil {
					return // cancelled once all were seen, or the deadline
				}
				mu.Lock()
				seen[string(d.Body)]++
				if len(seen) == total {
					cancel()
				}
				mu.Unlock()
				if err := d.Ack(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("shared subscription delivered %d distinct messages, want %d", len(seen), total)
	}
	for b, times := range seen {
		if times != 1 {
			t.Fatalf("message %s delivered %d times in the shared subscription", b, times)
		}
	}
	expectBodies(t, all, "the other subscription", want...)
}

// conformTopicNonDurable: a non-durable subscription ends, with what it
// holds, when its last consumer closes; a private one (no name) at once.
func conformTopicNonDurable(t *testing.T, k endpointKind) {
	n, ep := openTopics(t, k)
	priv := epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{})
	named := []*petrel.Consumer{
		epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{Name: "temp"}),
		epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{Name: "temp"}),
	}
	if subs := n.Subscriptions(); len(subs) != 2 || subs[0].Durable || subs[1].Durable {
		t.Fatalf("subscriptions: %+v, want two non-durable", subs)
	}
	epPublish(t, ep, "orders.a", "held")
	expectBodies(t, priv, "private subscription", "held")
	priv.Close()
	named[0].Close()
	// A closed consumer of a subscription is closed, whether its
	// subscription ended with it (priv) or lives on (named[0]).
	for i, c := range []*petrel.Consumer{priv, named[0]} {
		if _, err := c.Poll(); !errors.Is(err, petrel.ErrClosed) {
			t.Errorf("Poll of closed consumer %d: %v, want ErrClosed", i, err)
		}
	}
	petreltest.Eventually(t, "the private subscription to end, and temp to keep one consumer", func() bool {
		subs := n.Subscriptions()
		return len(subs) == 1 && subs[0].Name == "temp" && subs[0].Consumers == 1
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	named[1].Close()
	petreltest.Eventually(t, "temp to end with its last consumer", func() bool {
		return len(n.Subscriptions()) == 0
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	epPublish(t, ep, "orders.b", "dropped")
	// A client's publish passes through the topic inbox, which the pump
	// settles after it fanned it out (to nothing): wait for that.
	petreltest.Eventually(t, "the store to hold nothing once every subscription ended", func() bool {
		if err := n.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		m, _ := n.Store().Totals()
		return m == 0
	}, func() string { m, _ := n.Store().Totals(); return fmt.Sprintf("%d messages", m) })
}

// conformTopicRefused: a pattern outside every topic space, a malformed
// one and a durable subscription without a name are refused.
func conformTopicRefused(t *testing.T, k endpointKind) {
	_, ep := openTopics(t, k)
	ctx := context.Background()
	if _, err := ep.Subscribe(ctx, "invoices.#", petrel.SubscribeOptions{}); !isRefusal(k, err, petrel.ErrNoTopicSpace) {
		t.Errorf("subscribe outside the topic spaces: %v, want ErrNoTopicSpace", err)
	}
	if _, err := ep.Subscribe(ctx, "orders..#", petrel.SubscribeOptions{}); err == nil {
		t.Error("subscribe to a malformed pattern succeeded")
	}
	if _, err := ep.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Durable: true}); !errors.Is(err, petrel.ErrSubscription) {
		t.Errorf("durable subscribe without a name: %v, want ErrSubscription", err)
	}
}

// isRefusal reports whether err is want, or for a remote endpoint a
// refusal by the node whose reason carries want's text: the sentinel does
// not cross the wire, its text does.
func isRefusal(k endpointKind, err, want error) bool {
	if errors.Is(err, want) {
		return true
	}
	return k.remote && errors.Is(err, petrel.ErrRefused) && strings.Contains(err.Error(), want.Error())
}
