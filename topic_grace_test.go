package petrel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A partition between A and B outlasts the grace: A drops B's non-durable
// interest (a publish meanwhile is unrouted); once the partition heals, B
// announces it again, and A's publishes reach B's subscription.
func TestInterestGraceReannouncesAfterPartition(t *testing.T) {
	var clk clock
	const grace = time.Hour
	m := newMesh(t, "a", "b")
	toA, toB := petreltest.NewProxy(t, m["a"]), petreltest.NewProxy(t, m["b"])
	open := func(name, nb string, via *petreltest.Proxy) *petrel.Node {
		return nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), withTopics("orders.#"), clk.option(), nodes.With(withAdmin),
			nodes.With(func(c *petrel.Config) {
				c.TopicInterestGrace = grace
				c.Nodes = []petrel.NodeConfig{{Name: nb, Connector: "tcp://" + via.Addr()}}
			}))
	}
	a := open("a", "b", toB)
	b := open("b", "a", toA)
	live := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{})
	waitInterest(t, a, "b/b/orders.eu.*")

	toA.Shut(true)
	toB.Shut(true)
	// Each poll moves both clocks on, so that whenever each janitor saw
	// its link go down, the grace runs out after it.
	petreltest.Eventually(t, "a dropped b's non-durable interest", func() bool {
		clk.advance(grace / 4)
		return len(a.TopicInterest()) == 0
	}, func() string { return fmt.Sprintf("a learned %+v; links %+v", a.TopicInterest(), a.Links()) })
	publish(t, a, "orders.eu.lost", "lost", nil)

	toA.Shut(false)
	toB.Shut(false)
	petreltest.Eventually(t, "b announced its interest again", func() bool {
		clk.advance(grace / 4)
		return len(a.TopicInterest()) == 1
	}, func() string { return fmt.Sprintf("a learned %+v; b's links %+v", a.TopicInterest(), b.Links()) })
	publish(t, a, "orders.eu.after", "after", nil)
	drainSub(t, live, []string{"after"}, a, b)
	if got := scrape(t, a)["petrel_topic_unrouted_total"]; got != 1 {
		t.Fatalf("unrouted %v, want 1: the publish during the partition", got)
	}
}

// Interest follows discovered nodes as anycast does: A and B know each
// other only by discovery, B's durable subscription is announced to A
// once A is found, and A's publishes reach it.
func TestInterestFollowsDiscoveredNodes(t *testing.T) {
	disc := petrel.DiscoveryConfig{
		Enabled: true, Group: fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t)),
		Period: 50 * time.Millisecond, Timeout: 5 * time.Second,
	}
	open := func(name string) *petrel.Node {
		return nodes.Open(t, nodes.Name(name), nodes.Listen("127.0.0.1:0"), withTopics("orders.#"),
			nodes.With(func(c *petrel.Config) { c.Discovery = disc }))
	}
	b := open("b")
	audit := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	a := open("a")
	waitInterest(t, a, "b/b/orders.#")
	bodies := publishN(t, a, "orders.eu.created", 5)
	drainSub(t, audit, bodies, a)
}

// A neighbour added by a reload is sent the node's interest: B's
// subscription, made before B knew A, reaches A once a reload adds A to
// B's nodes, and A's publishes reach it.
func TestInterestFollowsReloadedNeighbour(t *testing.T) {
	m := newMesh(t, "a", "b")
	var cfgB petrel.Config
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(m["b"]), withTopics("orders.#"), nodes.With(func(c *petrel.Config) { cfgB = *c }))
	audit := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	a := m.open(t, "a", "", "b")
	cfgB.Nodes = []petrel.NodeConfig{{Name: "a", Connector: "tcp://" + m["a"]}}
	if _, err := b.Reconfigure(context.Background(), cfgB); err != nil {
		t.Fatal(err)
	}
	waitInterest(t, a, "b/b/orders.#")
	bodies := publishN(t, a, "orders.eu.created", 5)
	drainSub(t, audit, bodies, a)
}

// A node that only publishes has no link toward B until its first
// forwarded publish. B's non-durable interest, announced over B's own
// link into A, stays past the grace while that link is up, and A's
// publishes reach it. Before, A counted B unreachable from its start, for
// want of a link of its own toward B, and dropped the interest at the end
// of the grace: every publish after it was unrouted.
//
// C, which A cannot reach, relays B's interest to A too; once C's link
// into A is cut, A drops that copy at the end of the grace, which shows
// that A's janitor ran past it. (A passes nothing on toward B: C's copy
// names B in its hops.)
func TestInterestGraceKeepsNeighbourLinkedIn(t *testing.T) {
	var clk clock
	const grace = time.Hour
	m := newMesh(t, "a", "b", "c", "void")
	toA := petreltest.NewProxy(t, m["a"])
	a := nodes.Open(t, nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), clk.option(), nodes.With(func(c *petrel.Config) {
		c.TopicInterestGrace = grace
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + m["b"]}, {Name: "c", Connector: "tcp://" + m["void"]}}
	}))
	b := m.open(t, "b", "", "a", "c")
	nodes.Open(t, nodes.Name("c"), nodes.Listen(m["c"]), withTopics("orders.#"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "a", Connector: "tcp://" + toA.Addr()}, {Name: "b", Connector: "tcp://" + m["b"]}}
	}))
	live := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{})
	waitInterest(t, a, "b/b/orders.eu.*", "c/b/orders.eu.*")

	toA.Shut(true)
	petreltest.Eventually(t, "a dropped the copy of b's interest that c relayed", func() bool {
		clk.advance(grace / 4)
		return !learned(a, "c/b/orders.eu.*")
	}, func() string { return fmt.Sprintf("a learned %+v; links %+v", a.TopicInterest(), a.Links()) })
	// Each look of the janitor's checks every neighbour: had b's own
	// interest gone, it went at the tick that dropped c's copy, or before.
	if !learned(a, "b/b/orders.eu.*") {
		t.Fatalf("a dropped the interest of b, whose link into a is up: a learned %+v", a.TopicInterest())
	}
	bodies := publishN(t, a, "orders.eu.created", 3)
	// Not from a: its send queue toward c holds what a passed on to c.
	drainSub(t, live, bodies)
}

// The nodes need not agree on how long an outage lasted, nor share a
// grace: A, whose grace is short, drops B's non-durable interest during
// a partition that B's longer grace outlasts. Once the partition heals,
// B announces its non-durable interest again all the same, and A's
// publishes reach it. Before, B did so only past its own grace, and A
// kept nothing of B's interest until B's next subscription change.
func TestInterestGraceRestoredAfterShorterOutageThere(t *testing.T) {
	m := newMesh(t, "a", "b")
	toA, toB := petreltest.NewProxy(t, m["a"]), petreltest.NewProxy(t, m["b"])
	open := func(name, nb string, via *petreltest.Proxy, grace time.Duration) *petrel.Node {
		return nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
			c.TopicInterestGrace = grace
			c.Nodes = []petrel.NodeConfig{{Name: nb, Connector: "tcp://" + via.Addr()}}
		}))
	}
	a := open("a", "b", toB, 300*time.Millisecond) // a janitor tick of 50 ms
	b := open("b", "a", toA, 5*time.Second)        // and of 500 ms
	subscribe(t, a, "orders.us.*", petrel.SubscribeOptions{Name: "own", Durable: true})
	live := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{})
	waitInterest(t, a, "b/b/orders.eu.*")
	waitInterest(t, b, "a/a/orders.us.*")

	shut := time.Now()
	toA.Shut(true)
	toB.Shut(true)
	petreltest.Eventually(t, "a dropped b's non-durable interest", func() bool {
		return !learned(a, "b/b/orders.eu.*")
	}, func() string { return fmt.Sprintf("a learned %+v; links %+v", a.TopicInterest(), a.Links()) })
	// B's janitor counts an outage only if one of its looks sees it: the
	// partition lasts three of them at least.
	time.Sleep(time.Until(shut.Add(1500 * time.Millisecond)))
	toA.Shut(false)
	toB.Shut(false)
	waitInterest(t, a, "b/b/orders.eu.*")
	bodies := publishN(t, a, "orders.eu.created", 3)
	drainSub(t, live, bodies, a)
}

// A durable subscription joins a non-durable one with the same pattern at
// B: A learns the pattern as durable, and keeps it, with the publishes
// that wait toward B, through a partition that outlasts the grace. B's
// other, non-durable, subscription shows the grace ran out. Before, the
// pattern stayed non-durable as first announced: A dropped it, and
// pruned the durable subscription's publishes.
func TestInterestGraceKeepsDurableJoiningNonDurable(t *testing.T) {
	var clk clock
	const grace = time.Hour
	m := newMesh(t, "a", "b")
	toA, toB := petreltest.NewProxy(t, m["a"]), petreltest.NewProxy(t, m["b"])
	a := nodes.Open(t, nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), clk.option(), nodes.With(func(c *petrel.Config) {
		c.TopicInterestGrace = grace
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + toB.Addr()}}
	}))
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(m["b"]), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "a", Connector: "tcp://" + toA.Addr()}}
	}))
	subscribe(t, b, "orders.#", petrel.SubscribeOptions{})
	d1 := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "d1", Durable: true})
	subscribe(t, b, "orders.us.*", petrel.SubscribeOptions{})
	// B announced orders.us.* after d1's change: A applied both.
	waitInterest(t, a, "b/b/orders.#", "b/b/orders.us.*")

	toA.Shut(true)
	toB.Shut(true)
	bodies := publishN(t, a, "orders.eu.created", 5)
	petreltest.Eventually(t, "a dropped b's non-durable orders.us.*", func() bool {
		clk.advance(grace / 4)
		return !learned(a, "b/b/orders.us.*")
	}, func() string { return fmt.Sprintf("a learned %+v; links %+v", a.TopicInterest(), a.Links()) })
	toA.Shut(false)
	toB.Shut(false)
	drainSub(t, d1, bodies, a)
}
