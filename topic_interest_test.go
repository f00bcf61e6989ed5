package petrel_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// mesh holds the listen addresses of a test's nodes, chosen before any
// opens, so that each can name the others as neighbours.
type mesh map[string]string

func newMesh(t *testing.T, names ...string) mesh {
	t.Helper()
	m := mesh{}
	for _, name := range names {
		// Below the ephemeral range: the port is closed here and opened
		// again by the node a moment later, and one of that range could
		// meanwhile go to any socket bound to port 0 elsewhere.
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		m[name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return m
}

// open opens node name of the mesh, listening on its address, with the
// topic space orders.# and neighbours as its configured nodes.
func (m mesh) open(t *testing.T, name, dir string, neighbours ...string) *petrel.Node {
	t.Helper()
	return nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		if dir != "" {
			c.DataDir = dir
		}
		for _, nb := range neighbours {
			c.Nodes = append(c.Nodes, petrel.NodeConfig{Name: nb, Connector: "tcp://" + m[nb]})
		}
	}))
}

// waitInterest waits until n learned, for each "neighbour/node/pattern"
// of want, that interest.
func waitInterest(t *testing.T, n *petrel.Node, want ...string) {
	t.Helper()
	var got []string
	petreltest.Eventually(t, fmt.Sprintf("%s learned interest %v", n.Name(), want), func() bool {
		got = got[:0]
		for _, i := range n.TopicInterest() {
			got = append(got, i.Neighbour+"/"+i.Node+"/"+i.Pattern)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("learned %v", got) })
}

// linkAcked returns what n's link for topic traffic to node had acked.
func linkAcked(n *petrel.Node, node string) int64 {
	for _, l := range n.Links() {
		if l.Queue == "_petrel.topics@"+node {
			return l.Acked
		}
	}
	return 0
}

func waitAcked(t *testing.T, n *petrel.Node, node string, want int64) {
	t.Helper()
	petreltest.Eventually(t, fmt.Sprintf("%s's link to %s acked %d", n.Name(), node, want), func() bool {
		return linkAcked(n, node) == want
	}, func() string { return fmt.Sprintf("links %+v", n.Links()) })
}

// drainSub receives from the subscription consumer c, acking each,
// until every body of sent arrived, failing on an unknown or repeated one;
// then, once the links of from settled, requires nothing more.
func drainSub(t *testing.T, c *petrel.Consumer, sent []string, from ...*petrel.Node) {
	t.Helper()
	want := make(map[string]bool, len(sent))
	for _, b := range sent {
		want[b] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < len(want) {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("%s: received %d of %d distinct messages: %v\nlinks: %+v", c.Address(), len(seen), len(want), err, linksOf(from))
		}
		receivedOnce(t, d, want, seen)
	}
	petreltest.Eventually(t, "the senders' links empty, all acked by the next hop", func() bool {
		return linksSettled(from)
	}, func() string { return linksOf(from) })
	if d, err := c.Poll(); err == nil {
		t.Fatalf("%s: extra delivery %q after all %d arrived and the links settled", c.Address(), d.Body, len(want))
	}
}

func publishN(t *testing.T, n *petrel.Node, topic string, total int) []string {
	t.Helper()
	bodies := make([]string, total)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("%s-%s-%d", n.Name(), topic, i)
		publish(t, n, topic, bodies[i], nil)
	}
	return bodies
}

// A publishes to orders.eu.created; B (two overlapping subscriptions)
// and C (one) are behind C: each subscription gets each message once,
// and A's link to C carries one copy per publish.
func TestInterestRelayOneCopyPerHop(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	b := m.open(t, "b", "", "c")
	c := m.open(t, "c", "", "a", "b")
	a := m.open(t, "a", "", "c")
	b1 := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "b1", Durable: true})
	b2 := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "b2", Durable: true})
	c1 := subscribe(t, c, "orders.#", petrel.SubscribeOptions{Name: "c1", Durable: true})
	waitInterest(t, a, "c/b/orders.#", "c/b/orders.eu.*", "c/c/orders.#")
	waitInterest(t, c, "b/b/orders.#", "b/b/orders.eu.*")
	const total = 50
	bodies := publishN(t, a, "orders.eu.created", total)
	drainSub(t, b1, bodies, a, c)
	drainSub(t, b2, bodies, a, c)
	drainSub(t, c1, bodies, a, c)
	// A has no subscription and C is its only neighbour: its link carries
	// the publishes alone. C's link to B carries them and C's own
	// announcement of orders.#.
	waitAcked(t, a, "c", total)
	waitAcked(t, c, "b", total+1)
	if got := linkAcked(a, "c"); got != total {
		t.Fatalf("a sent %d on its link to c, want %d: one copy per publish", got, total)
	}
}

// B is closed while A publishes; reopened on its data directory, its
// durable subscription gets every message once.
func TestInterestDurableWhileDown(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	dirB := filepath.Join(t.TempDir(), "b")
	b := m.open(t, "b", dirB, "c")
	c := m.open(t, "c", "", "a", "b")
	a := m.open(t, "a", "", "c")
	sub, err := b.Subscribe(context.Background(), "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	waitInterest(t, a, "c/b/orders.#")
	sub.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	const total = 40
	bodies := publishN(t, a, "orders.eu.created", total)
	b = m.open(t, "b", dirB, "c")
	audit := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	drainSub(t, audit, bodies, a, c)
	if got := linkAcked(a, "c"); got != total {
		t.Fatalf("a sent %d on its link to c, want %d", got, total)
	}
}

// Unsubscribing a durable subscription withdraws its interest upstream.
func TestInterestUnsubscribeWithdraws(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	b := m.open(t, "b", "", "c")
	c := m.open(t, "c", "", "a", "b")
	a := m.open(t, "a", "", "c")
	subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	waitInterest(t, a, "c/b/orders.#")
	if err := b.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the interest withdrawn at a and c", func() bool {
		return len(a.TopicInterest()) == 0 && len(c.TopicInterest()) == 0
	}, func() string { return fmt.Sprintf("a %v, c %v", a.TopicInterest(), c.TopicInterest()) })
	publishN(t, a, "orders.eu.created", 5)
	if st, ok := a.QueueStat("_petrel.topics@c"); ok && st.Enqueued != 0 {
		t.Fatalf("a queued %d publishes toward c after the interest was withdrawn", st.Enqueued)
	}
}

// The relay C restarts on its data directory: what it learned is
// persisted, so A's publishes still reach B through it.
func TestInterestRelayRestart(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	dirC := filepath.Join(t.TempDir(), "c")
	b := m.open(t, "b", "", "c")
	c := m.open(t, "c", dirC, "a", "b")
	a := m.open(t, "a", "", "c")
	audit := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	waitInterest(t, a, "c/b/orders.#")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	first := publishN(t, a, "orders.eu.created", 10)
	c = m.open(t, "c", dirC, "a", "b")
	if got := c.TopicInterest(); len(got) != 1 || got[0].Node != "b" || got[0].Pattern != "orders.#" {
		t.Fatalf("c reopened with interest %+v, want b's orders.#", got)
	}
	second := publishN(t, a, "orders.us.created", 10)
	drainSub(t, audit, append(first, second...), a, c)
}

// A triangle where every node subscribes and publishes: each
// subscription gets every message once, and the links carry a bounded,
// known number of copies (no loop).
func TestInterestTriangle(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	all := []*petrel.Node{
		m.open(t, "a", "", "b", "c"),
		m.open(t, "b", "", "a", "c"),
		m.open(t, "c", "", "a", "b"),
	}
	subs := map[*petrel.Node]*petrel.Consumer{}
	for _, n := range all {
		subs[n] = subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "s-" + n.Name(), Durable: true})
	}
	for _, n := range all {
		var want []string
		for _, o := range all {
			if o != n {
				want = append(want, o.Name()+"/"+o.Name()+"/orders.#")
			}
		}
		waitInterest(t, n, want...)
	}
	// Interest settles: each node's link to each other carries its own
	// announcement and the one of the third node, passed on.
	for _, n := range all {
		for _, o := range all {
			if o != n {
				waitAcked(t, n, o.Name(), 2)
			}
		}
	}
	const perNode = 20
	var bodies []string
	for _, n := range all {
		bodies = append(bodies, publishN(t, n, "orders.eu.created", perNode)...)
	}
	for _, n := range all {
		drainSub(t, subs[n], bodies, all...)
	}
	// A publish goes from its origin to both others. Each of them passes
	// it on to the third unless the third already holds it: the copy that
	// arrives second at a node is a duplicate, dropped by its inbox, so is
	// not passed on. Which copy comes first is a race, but at least one of
	// the two relays (the first to fan it out sends it on), and a copy that
	// came through both other nodes goes nowhere. So each publish crosses
	// 3 or 4 links, and each directed link carries its node's own
	// publishes, at most as many relayed ones, and the 2 announcements.
	settled := func() bool {
		for _, n := range all {
			if st, ok := n.QueueStat("topic:inbox"); !ok || st.Depth != 0 || st.InFlight != 0 {
				return false
			}
		}
		return linksSettled(all)
	}
	petreltest.Eventually(t, "every inbox and link empty", func() bool {
		return settled() && settled()
	}, func() string { return linksOf(all) })
	var total int64
	for _, n := range all {
		for _, o := range all {
			if o == n {
				continue
			}
			got := linkAcked(n, o.Name())
			total += got
			if got < 2+perNode || got > 2+2*perNode {
				t.Errorf("%s's link to %s acked %d, want %d to %d", n.Name(), o.Name(), got, 2+perNode, 2+2*perNode)
			}
		}
		if d, err := subs[n].Poll(); err == nil {
			t.Errorf("%s: extra delivery %q", n.Name(), d.Body)
		}
	}
	if pub := int64(3 * perNode); total < 12+3*pub || total > 12+4*pub {
		t.Errorf("the links carried %d messages, want %d to %d: 12 announcements and 3 or 4 copies per publish", total, 12+3*pub, 12+4*pub)
	}
	t.Logf("links carried %d messages for %d publishes (12 announcements)", total, 3*perNode)
}

// B's pattern turns durable when a durable subscription joins the
// non-durable one that announced it, and non-durable again once the
// durable one is deleted: C, B's neighbour, and A, behind C, learn each
// change, and C keeps it across a restart. Before, the pattern stayed as
// first announced, so the grace could drop a durable subscription's
// interest, and what waited for it, during an outage.
func TestInterestDurabilityFollowsSubscriptions(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	dirC := filepath.Join(t.TempDir(), "c")
	b := m.open(t, "b", "", "c")
	c := m.open(t, "c", dirC, "a", "b")
	a := m.open(t, "a", "", "c")
	// Interest messages are applied in the order B sent them: once A
	// learned a later pattern, C and A applied what came before it.
	marks := 0
	expect := func(durable bool) {
		t.Helper()
		marks++
		mark := fmt.Sprintf("orders.mark%d.#", marks)
		subscribe(t, b, mark, petrel.SubscribeOptions{})
		waitInterest(t, a, "c/b/"+mark)
		requireDurable(t, c, "b/b/orders.#", durable)
		requireDurable(t, a, "c/b/orders.#", durable)
	}
	subscribe(t, b, "orders.#", petrel.SubscribeOptions{})
	expect(false)
	subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "d1", Durable: true})
	expect(true)

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = m.open(t, "c", dirC, "a", "b")
	requireDurable(t, c, "b/b/orders.#", true)

	if err := b.Unsubscribe(context.Background(), "d1"); err != nil {
		t.Fatal(err)
	}
	expect(false)
}

// requireDurable fails unless n learned the interest
// "neighbour/node/pattern" want, with that durability.
func requireDurable(t *testing.T, n *petrel.Node, want string, durable bool) {
	t.Helper()
	for _, i := range n.TopicInterest() {
		if i.Neighbour+"/"+i.Node+"/"+i.Pattern == want {
			if i.Durable != durable {
				t.Fatalf("%s learned %s with durable %v, want %v", n.Name(), want, i.Durable, durable)
			}
			return
		}
	}
	t.Fatalf("%s has not learned %s: %+v", n.Name(), want, n.TopicInterest())
}
