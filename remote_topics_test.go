package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestRemoteSubscribeAccess: a client subscribes to a pattern only if a
// subscribe rule covers it: "orders.#" covers "orders.#", nothing covers
// "billing.#"; a consume rule is not enough.
func TestRemoteSubscribeAccess(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#", "billing.#"),
		nodes.With(func(c *petrel.Config) {
			c.Access = []petrel.AccessRule{{Identity: "app-1", Consume: []string{"*"},
				Publish: []string{"orders.#"}, Subscribe: []string{"orders.#"}}}
		}))
	cl := nodes.Dial(t, n, petrel.DialOptions{})
	ctx := context.Background()
	_, err := cl.Subscribe(ctx, "billing.#", petrel.SubscribeOptions{})
	if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `"app-1" may not`) {
		t.Fatalf("subscribe to billing.#: %v, want ErrDenied with the reason", err)
	}
	if len(n.Subscriptions()) != 0 {
		t.Fatalf("a denied subscribe left a subscription: %+v", n.Subscriptions())
	}
	c, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "mine", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := cl.Producer()
	m := p.CreateDataMessage("orders.eu")
	m.Body = []byte("allowed")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	expectBodies(t, c, "allowed subscription", "allowed")
}

// TestRemoteSubscribeInterceptors: the interceptors see a client's topic
// subscription as the client's, and a refusal of OnSubscribe reaches the
// client as a refusal with the reason, leaving no subscription behind.
func TestRemoteSubscribeInterceptors(t *testing.T) {
	h := &hooks{name: "audit", subscribe: func(s petrel.SubscribeInfo) error {
		if s.Address == "sub:forbidden" {
			return errBlocked
		}
		return nil
	}}
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#"), withInterceptors(h))
	cl := nodes.Dial(t, n, petrel.DialOptions{})
	ctx := context.Background()
	_, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "forbidden"})
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), errBlocked.Error()) {
		t.Fatalf("subscribe refused by an interceptor: %v, want ErrRefused with %q", err, errBlocked)
	}
	petreltest.Eventually(t, "the refused non-durable subscription to end", func() bool {
		return len(n.Subscriptions()) == 0
	})
	c, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "seen"})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, n, "orders.eu", "watched", nil)
	d := receive(t, c)
	if prop(d.Message, "delivered-by") != "audit" {
		t.Fatalf("OnDeliver did not see the delivery: properties %v", d.Properties)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, e := range []string{"subscribe sub:seen client", "deliver client", "ack client", "unsubscribe sub:seen client"} {
		petreltest.Eventually(t, "the interceptor to see "+e, func() bool { return h.has(e) }, func() string { return strings.Join(h.seen(), "\n") })
	}
}

// TestRemoteSubscribeDurableAcrossReconnect: a durable subscription keeps
// what is published while the client's connection is down, and the client
// subscribes again on reconnect and gets it, in order, once. A private
// one ends at the node with the lost connection, and the client's comes
// back as a new one.
func TestRemoteSubscribeDurableAcrossReconnect(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#"))
	proxy := petreltest.NewProxy(t, n.ListenAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := dialVia(t, proxy, petrel.DialOptions{})
	durable, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "keep", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	private, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer private.Close()
	publish(t, n, "orders.a", "before", nil)
	expectBodies(t, durable, "durable before the cut", "before")
	expectBodies(t, private, "private before the cut", "before")
	privateName := ""
	petreltest.Eventually(t, "the acks of before to reach the node", func() bool {
		subs := n.Subscriptions()
		for _, s := range subs {
			if !s.Durable {
				privateName = s.Name
			}
		}
		return len(subs) == 2 && subs[0].Depth == 0 && subs[1].Depth == 0
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	petreltest.Eventually(t, "the node to end the sessions of the cut connection", func() bool {
		proxy.Cut()
		s, _ := subscriptionInfo(n, "keep")
		_, privateLeft := subscriptionInfo(n, privateName)
		return s.Consumers == 0 && !privateLeft
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	publish(t, n, "orders.b", "while-cut-1", nil)
	publish(t, n, "orders.c", "while-cut-2", nil)
	petreltest.Eventually(t, "the client to subscribe again", func() bool {
		s, _ := subscriptionInfo(n, "keep")
		return s.Consumers == 1 && len(n.Subscriptions()) == 2
	}, func() string { return fmt.Sprint(n.Subscriptions()) })
	publish(t, n, "orders.d", "after", nil)
	expectBodies(t, durable, "durable after the reconnect", "while-cut-1", "while-cut-2", "after")
	// The new private subscription may have caught the publishes made
	// after the reconnect, never "before".
	for {
		d := receive(t, private)
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
		body := string(d.Body)
		if body == "after" {
			break
		}
		if !strings.HasPrefix(body, "while-cut-") {
			t.Fatalf("private subscription after the reconnect delivered %q", body)
		}
	}
}
