package petrel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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
	// More than one batch of the prune's, between those B still wants.
	const eu = 6000
	publishN(t, a, "orders.eu.created", 10)
	us := publishN(t, a, "orders.us.created", 5)
	publishAsync(t, a, "orders.eu.created", eu-10)
	waitDepth(t, a, "_petrel.topics@b", eu+5)
	if err := b.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "a forgot b's orders.eu.*", func() bool {
		return len(a.TopicInterest()) == 1
	}, func() string { return fmt.Sprintf("%+v", a.TopicInterest()) })
	waitDepth(t, a, "_petrel.topics@b", 5)
	waitPruned(t, a, "unsubscribed", eu)
	if v := scrape(t, a)[`petrel_topic_pruned_total{reason="grace"}`]; v != 0 {
		t.Fatalf("petrel_topic_pruned_total{reason=\"grace\"} = %v, want 0", v)
	}
	// B becomes reachable: its remaining subscription gets its five.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = m.openB(t, dirB, true)
	drainSub(t, subscribe(t, b, "orders.us.*", petrel.SubscribeOptions{Name: "us", Durable: true}), us, a)
}

// B withdraws and makes again its durable subscription over and over
// while A holds a backlog toward it: A prunes what waited for it, counted
// once, and reads its send queue toward B a few times, not once per
// withdrawal (petrel_topic_prune_runs_total). A is down while B flaps, so
// that the 41 changes reach it together whatever the machine's pace.
func TestInterestFlappingWithdrawalsPruneInFewRuns(t *testing.T) {
	m := newMesh(t, "a", "b")
	dirA := filepath.Join(t.TempDir(), "a")
	withDir := nodes.With(func(c *petrel.Config) { c.DataDir = dirA })
	a := m.openA(t, withDir)
	b := m.openB(t, filepath.Join(t.TempDir(), "b"), false)
	subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "audit", Durable: true}).Close()
	waitInterest(t, a, "b/b/orders.eu.*")
	publishAsync(t, a, "orders.eu.created", 2000)
	waitDepth(t, a, "_petrel.topics@b", 2000)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	const flaps = 20
	for range flaps {
		if err := b.Unsubscribe(context.Background(), "audit"); err != nil {
			t.Fatal(err)
		}
		subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "audit", Durable: true}).Close()
	}
	if err := b.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	a = m.openA(t, withDir)
	petreltest.Eventually(t, "a forgot b's orders.eu.*", func() bool {
		return len(a.TopicInterest()) == 0
	}, func() string { return fmt.Sprintf("%+v", a.TopicInterest()) })
	waitDepth(t, a, "_petrel.topics@b", 0)
	waitPruned(t, a, "unsubscribed", 2000)
	runs := scrape(t, a)["petrel_topic_prune_runs_total"]
	if runs < 1 || runs > 3 {
		t.Fatalf("petrel_topic_prune_runs_total = %v after %d withdrawals; want a few", runs, flaps+1)
	}
	t.Logf("%d withdrawals, %v prune runs", flaps+1, runs)
}

// publishAsync publishes total messages to topic without waiting for
// each: for a backlog of thousands.
func publishAsync(t *testing.T, n *petrel.Node, topic string, total int) {
	t.Helper()
	p := n.Producer()
	pend := make([]*petrel.Pending, total)
	for i := range pend {
		m := p.CreateDataMessage(topic)
		m.Body = []byte(fmt.Sprint(i))
		pend[i] = p.SendAsync(m)
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatalf("publish to %q: %v", topic, err)
		}
	}
}

// clock is a node's clock that a test moves ahead.
type clock struct{ ahead atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(d time.Duration) { c.ahead.Add(int64(d)) }
func (c *clock) option() nodes.Option {
	return nodes.With(func(cfg *petrel.Config) { cfg.Store.Now = c.Now })
}

// A cannot reach B, nor B A, past topic_interest_grace: A drops the
// non-durable interest it learned from B, passes the drop on to C, and
// drops, counted, what waited toward B for it alone. B's durable
// interest, and what waits for it, stay.
func TestInterestGraceDropsNonDurable(t *testing.T) {
	m := newMesh(t, "a", "b", "c")
	var clk clock
	const grace = time.Hour
	a := m.openA(t, clk.option(), nodes.With(func(cfg *petrel.Config) {
		cfg.TopicInterestGrace = grace
		cfg.Nodes = append(cfg.Nodes, petrel.NodeConfig{Name: "c", Connector: "tcp://" + m["c"]})
	}))
	c := m.open(t, "c", "", "a")
	// B does not listen, and reaches A through toA, shut below.
	toA := petreltest.NewProxy(t, m["a"])
	b := m.openB(t, filepath.Join(t.TempDir(), "b"), false, nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "a", Connector: "tcp://" + toA.Addr()}}
	}))
	live := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{})
	defer live.Close()
	subscribe(t, b, "orders.us.*", petrel.SubscribeOptions{Name: "us", Durable: true}).Close()
	waitInterest(t, a, "b/b/orders.eu.*", "b/b/orders.us.*")
	waitInterest(t, c, "a/b/orders.eu.*", "a/b/orders.us.*")
	publishN(t, a, "orders.eu.created", 10)
	publishN(t, a, "orders.us.created", 4)
	waitDepth(t, a, "_petrel.topics@b", 14)
	if got := scrape(t, a)[`petrel_topic_pruned_total{reason="grace"}`]; got != 0 {
		t.Fatalf("pruned %v before the grace ran out", got)
	}
	// B's link into A counts as B reachable: once it is cut, each poll
	// moves A's clock on, so that whenever A's janitor saw B go, the
	// grace runs out after it.
	toA.Shut(true)
	petreltest.Eventually(t, "a and c dropped b's non-durable interest", func() bool {
		clk.advance(grace / 4)
		return len(a.TopicInterest()) == 1 && len(c.TopicInterest()) == 1
	}, func() string { return fmt.Sprintf("a %+v, c %+v", a.TopicInterest(), c.TopicInterest()) })
	for _, n := range []*petrel.Node{a, c} {
		if got := n.TopicInterest()[0]; got.Pattern != "orders.us.*" || !got.Durable {
			t.Fatalf("%s kept %+v, want b's durable orders.us.*", n.Name(), got)
		}
	}
	waitDepth(t, a, "_petrel.topics@b", 4)
	waitPruned(t, a, "grace", 10)
}

// waitPruned waits for n's petrel_topic_pruned_total{reason} to reach
// want: the prune counts what it moved once the move has committed, so
// the send queue's depth can show it first.
func waitPruned(t *testing.T, n *petrel.Node, reason string, want float64) {
	t.Helper()
	key := `petrel_topic_pruned_total{reason="` + reason + `"}`
	petreltest.Eventually(t, key+" reaching its count", func() bool { return scrape(t, n)[key] == want },
		func() string { return fmt.Sprintf("%s = %v, want %v", key, scrape(t, n)[key], want) })
}
