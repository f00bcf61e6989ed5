package petrel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// openB opens node b of the mesh with a as its neighbour, on dir,
// listening on its mesh address only when listen is set: without it b
// reaches a, and a cannot reach b.
func (m mesh) openB(t *testing.T, dir string, listen bool, opts ...nodes.Option) *petrel.Node {
	t.Helper()
	opts = append([]nodes.Option{nodes.Name("b"), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		c.DataDir = dir
		c.Nodes = []petrel.NodeConfig{{Name: "a", Connector: "tcp://" + m["a"]}}
		if listen {
			c.Listen = m["b"]
		}
	})}, opts...)
	return nodes.Open(t, opts...)
}

// openA opens node a of the mesh, with b as its neighbour and an admin
// listener for its metrics.
func (m mesh) openA(t *testing.T, opts ...nodes.Option) *petrel.Node {
	t.Helper()
	opts = append([]nodes.Option{nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + m["b"]}}
	})}, opts...)
	return nodes.Open(t, opts...)
}

func waitDepth(t *testing.T, n *petrel.Node, queue string, want int64) {
	t.Helper()
	petreltest.Eventually(t, fmt.Sprintf("%s's %s holds %d", n.Name(), queue, want), func() bool {
		st, _ := n.QueueStat(queue)
		return st.Depth == want
	}, func() string { st, _ := n.QueueStat(queue); return fmt.Sprintf("%+v", st) })
}

// B's durable subscription is deleted while A cannot reach B: the
// withdrawal reaches A over B's own link, and A drops, counted, what
// waited in its send queue toward B for that subscription alone. What
// B's other subscription still wants stays, and reaches it once B is
// reachable.
func TestInterestWithdrawPrunesSendQueue(t *testing.T) {
	m := newMesh(t, "a", "b")
	dirB := filepath.Join(t.TempDir(), "b")
	a := m.openA(t)
	b := m.openB(t, dirB, false)
	subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "audit", Durable: true}).Close()
	subscribe(t, b, "orders.us.*", petrel.SubscribeOptions{Name: "us", Durable: true}).Close()
	waitInterest(t, a, "b/b/orders.eu.*", "b/b/orders.us.*")
	publishN(t, a, "orders.eu.created", 20)
	us := publishN(t, a, "orders.us.created", 5)
	waitDepth(t, a, "_petrel.topics@b", 25)
	if err := b.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "a forgot b's orders.eu.*", func() bool {
		return len(a.TopicInterest()) == 1
	}, func() string { return fmt.Sprintf("%+v", a.TopicInterest()) })
	waitDepth(t, a, "_petrel.topics@b", 5)
	got := scrape(t, a)
	if v := got[`petrel_topic_pruned_total{reason="unsubscribed"}`]; v != 20 {
		t.Fatalf("petrel_topic_pruned_total{reason=\"unsubscribed\"} = %v, want 20", v)
	}
	if v := got[`petrel_topic_pruned_total{reason="grace"}`]; v != 0 {
		t.Fatalf("petrel_topic_pruned_total{reason=\"grace\"} = %v, want 0", v)
	}
	// B becomes reachable: its remaining subscription gets its five.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = m.openB(t, dirB, true)
	drainSub(t, subscribe(t, b, "orders.us.*", petrel.SubscribeOptions{Name: "us", Durable: true}), us, a)
}
