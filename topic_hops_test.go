package petrel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// The hops of a topic message (petrel.hops) are the nodes' record of where
// it went, which keeps interest forwarding from looping. Only a copy a
// neighbour forwarded carries hops a node reads; an application's hops are
// ignored and removed, and no consumer sees the property.

const hopsProp = "petrel.hops"

// settleTopics waits until every topic inbox and link of all is empty:
// what was published has been fanned out and forwarded everywhere it goes.
func settleTopics(t *testing.T, all ...*petrel.Node) {
	t.Helper()
	settled := func() bool {
		for _, n := range all {
			if st, ok := n.QueueStat("topic:inbox"); ok && (st.Depth != 0 || st.InFlight != 0) {
				return false
			}
		}
		return linksSettled(all)
	}
	// Twice: a copy acked by one node sits in its inbox before the next
	// look at that node's links.
	petreltest.Eventually(t, "every topic inbox and link empty", func() bool {
		return settled() && settled()
	}, func() string { return linksOf(all) })
}

// pollBodies takes what the node's subscription c holds now, acking each,
// failing on a delivery that carries the hops property, and returns the
// bodies sorted.
func pollBodies(t *testing.T, c *petrel.Consumer) []string {
	t.Helper()
	var out []string
	for {
		d, err := c.Poll()
		if err != nil {
			break
		}
		if v, ok := d.Properties.Get(hopsProp); ok {
			t.Errorf("%s: %q delivered with %s=%q: an internal property of the nodes", c.Address(), d.Body, hopsProp, v.Str())
		}
		out = append(out, string(d.Body))
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

// TestTopicHopsFromApplications: on a chain a - b - c where each node has
// a durable subscription, publishes that carry a petrel.hops property set
// by their application reach every subscription: from a remote client of
// a (to the topic, to the topic named as a's, to the topic at b, relayed
// by a) and from a's own Producer (to the topic at b). Before, a node read
// the client's or producer's hops as the nodes the message had crossed,
// and so forwarded it to none of them, while Send returned nil.
func TestTopicHopsFromApplications(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	a := m.open(t, "a", "", "b")
	b := m.open(t, "b", "", "a", "c")
	c := m.open(t, "c", "", "b")
	all := []*petrel.Node{a, b, c}
	subs := map[string]*petrel.Consumer{}
	for _, n := range all {
		subs[n.Name()] = subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "s-" + n.Name(), Durable: true})
	}
	waitInterest(t, a, "b/b/orders.#", "b/c/orders.#")
	waitInterest(t, b, "a/a/orders.#", "c/c/orders.#")
	waitInterest(t, c, "b/b/orders.#", "b/a/orders.#")

	ctx := context.Background()
	cl := nodes.Dial(t, a, petrel.DialOptions{})
	send := func(p *petrel.Producer, dest, body, hops string) string {
		t.Helper()
		msg := p.CreateDataMessage(dest)
		msg.Body = []byte(body)
		msg.Properties.Set(hopsProp, message.String(hops))
		if err := p.Send(ctx, msg); err != nil {
			t.Fatalf("send %q to %q with %s=%q: %v", body, dest, hopsProp, hops, err)
		}
		return body
	}
	want := []string{
		send(cl.Producer(), "orders.eu.created", "client-bare", "b"),
		send(cl.Producer(), "orders.eu.created@a", "client-named", "b,c"),
		send(cl.Producer(), "orders.eu.created@b", "client-relayed", "c"),
		send(a.Producer(), "orders.eu.created@b", "producer-relayed", "c"),
		send(a.Producer(), "orders.eu.created", "producer-local", "b"),
	}
	slices.Sort(want)
	settleTopics(t, all...)
	for _, n := range all {
		if got := pollBodies(t, subs[n.Name()]); !slices.Equal(got, want) {
			t.Errorf("%s's subscription got %q, want %q", n.Name(), got, want)
		}
	}
}

// TestTopicHopsNotDelivered: a delivery carries no petrel.hops, to an
// embedded consumer or a remote client's; and a remote client that
// publishes again what it received, its properties copied (a common
// pattern), reaches the subscription on the node the message came from.
// Before, b's subscribers saw petrel.hops="a", and the client's copy of
// it made b forward the republish to everyone but a.
func TestTopicHopsNotDelivered(t *testing.T) {
	m := newMesh(t, "a", "b")
	a := m.open(t, "a", "", "b")
	b := m.open(t, "b", "", "a")
	ctx := context.Background()
	cl := nodes.Dial(t, b, petrel.DialOptions{})
	remote, err := cl.Subscribe(ctx, "orders.eu.#", petrel.SubscribeOptions{Name: "eu-remote", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	local := subscribe(t, b, "orders.eu.#", petrel.SubscribeOptions{Name: "eu-local", Durable: true})
	us := subscribe(t, a, "orders.us.#", petrel.SubscribeOptions{Name: "us", Durable: true})
	waitInterest(t, a, "b/b/orders.eu.#")
	waitInterest(t, b, "a/a/orders.us.#")

	publish(t, a, "orders.eu.created", "from-a", func(msg *message.Message) {
		msg.Properties.Set("tenant", message.String("t1"))
	})
	d := receive(t, remote)
	if v, ok := d.Properties.Get(hopsProp); ok {
		t.Errorf("the remote client's delivery carries %s=%q", hopsProp, v.Str())
	}
	if v, _ := d.Properties.Get("tenant"); v.Str() != "t1" {
		t.Fatalf("the delivery lost its application property: %+v", d.Properties)
	}
	// The client passes the message on, properties and all.
	p := cl.Producer()
	again := p.CreateDataMessage("orders.us.created")
	again.Body = d.Body
	for _, q := range d.Properties {
		again.Properties.Set(q.Key, q.Value)
	}
	if err := p.Send(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	settleTopics(t, a, b)
	if got := pollBodies(t, local); !slices.Equal(got, []string{"from-a"}) {
		t.Errorf("b's embedded subscription got %q, want [from-a]", got)
	}
	if got := pollBodies(t, us); !slices.Equal(got, []string{"from-a"}) {
		t.Errorf("a's subscription got %q, want the republish [from-a]: %s", got, fmt.Sprintf("links %s", linksOf([]*petrel.Node{a, b})))
	}
}
