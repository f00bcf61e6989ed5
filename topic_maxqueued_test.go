package petrel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A topic space's max_queued_messages bounds each of its subscriptions:
// one nobody consumes holds the first publishes up to the bound and drops
// the rest, counted in SubscriptionInfo and petrel_queue_overflowed_total,
// while a subscription that keeps up gets every publish. The bound holds
// again for the durable subscription after a restart, and its count
// carries on from what was stored with the drops; a space without one
// leaves its subscriptions unbounded.
func TestTopicMaxQueuedMessages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n")
	open := func() *petrel.Node {
		return nodes.Open(t, nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
			c.DataDir = dir
			c.Topics = []petrel.TopicConfig{{Pattern: "sensors.#", MaxQueuedMessages: 3}, {Pattern: "logs.#"}}
		}))
	}
	n := open()
	subscribe(t, n, "sensors.#", petrel.SubscribeOptions{Name: "slow", Durable: true}).Close()
	fast := subscribe(t, n, "sensors.#", petrel.SubscribeOptions{Name: "fast", Durable: true})
	logs := subscribe(t, n, "logs.#", petrel.SubscribeOptions{Name: "logs", Durable: true})
	var got []string
	for i := range 6 {
		publish(t, n, "sensors.t", fmt.Sprintf("m%d", i), nil)
		publish(t, n, "logs.app", fmt.Sprintf("l%d", i), nil)
		got = append(got, takeAll(t, fast)...)
	}
	if want := []string{"m0", "m1", "m2", "m3", "m4", "m5"}; !slices.Equal(got, want) {
		t.Fatalf("the subscription that keeps up got %v, want %v", got, want)
	}
	subs := map[string]petrel.SubscriptionInfo{}
	for _, s := range n.Subscriptions() {
		subs[s.Name] = s
	}
	if s := subs["slow"]; s.Depth != 3 || s.MaxQueued != 3 || s.Overflowed != 3 {
		t.Fatalf("slow: depth %d, max queued %d, overflowed %d; want 3, 3, 3", s.Depth, s.MaxQueued, s.Overflowed)
	}
	if s := subs["logs"]; s.Depth != 6 || s.MaxQueued != 0 || s.Overflowed != 0 {
		t.Fatalf("logs: depth %d, max queued %d, overflowed %d; want 6, 0, 0", s.Depth, s.MaxQueued, s.Overflowed)
	}
	if m := scrape(t, n); m[`petrel_queue_overflowed_total{queue="sub:slow"}`] != 3 || m[`petrel_queue_overflowed_total{queue="sub:fast"}`] != 0 {
		t.Fatalf("petrel_queue_overflowed_total: slow %v, fast %v; want 3, 0",
			m[`petrel_queue_overflowed_total{queue="sub:slow"}`], m[`petrel_queue_overflowed_total{queue="sub:fast"}`])
	}
	logs.Close()
	fast.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = open()
	publish(t, n, "sensors.t", "after the restart", nil)
	for _, s := range n.Subscriptions() {
		if s.Name == "slow" && (s.Depth != 3 || s.MaxQueued != 3 || s.Overflowed != 4) {
			t.Fatalf("slow after a restart: depth %d, max queued %d, overflowed %d; want 3, 3, 4", s.Depth, s.MaxQueued, s.Overflowed)
		}
	}
	slow := subscribe(t, n, "sensors.#", petrel.SubscribeOptions{Name: "slow", Durable: true})
	if got := takeAll(t, slow); !slices.Equal(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("slow holds %v, want the first three publishes", got)
	}
	if got := takeAll(t, subscribe(t, n, "sensors.#", petrel.SubscribeOptions{Name: "fast", Durable: true})); !slices.Equal(got, []string{"after the restart"}) {
		t.Fatalf("fast after the restart: %v", got)
	}
}

// With overflow drop_oldest a subscription keeps the latest: past its
// bound the topic janitor drops its oldest messages that no consumer
// holds, counted as overflowed, and a message a consumer holds stays.
func TestTopicMaxQueuedDropOldest(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
		c.Topics = []petrel.TopicConfig{{Pattern: "sensors.#", MaxQueuedMessages: 3, Overflow: "drop_oldest"}}
	}))
	c := subscribe(t, n, "sensors.#", petrel.SubscribeOptions{Name: "latest", Durable: true})
	publish(t, n, "sensors.t", "m0", nil)
	held, err := c.Poll()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 7; i++ {
		publish(t, n, "sensors.t", fmt.Sprintf("m%d", i), nil)
	}
	var s petrel.SubscriptionInfo
	// The drops are counted just after their commit: wait for both.
	petreltest.Eventually(t, "latest back to its bound, 4 dropped", func() bool {
		s = n.Subscriptions()[0]
		return s.Depth == 3 && s.Overflowed == 4
	}, func() string { return fmt.Sprintf("%+v", s) })
	if s.MaxQueued != 3 {
		t.Fatalf("latest: max queued %d, want 3", s.MaxQueued)
	}
	waitMetric(t, n, `petrel_queue_overflowed_total{queue="sub:latest"}`, 4)
	if err := held.Ack(); err != nil {
		t.Fatalf("ack the message held through the drops: %v", err)
	}
	if got := takeAll(t, c); !slices.Equal(got, []string{"m5", "m6"}) {
		t.Fatalf("latest holds %v, want the two newest beside the one held", got)
	}
}

// topic_forward_max_queued bounds what waits toward a neighbour that is
// away: a's publishes past it get no copy toward b, counted at a, and
// still succeed; b's durable subscription gets the ones before the bound
// once b is back, each once. A bound below the link's window, which a
// link that keeps up would pass, is refused at open.
func TestTopicForwardMaxQueued(t *testing.T) {
	a, openB := absentNeighbour(t, 5, "")
	bodies := publishN(t, a, "orders.eu.created", 12)
	st, ok := a.QueueStat("_petrel.topics@b")
	if !ok {
		t.Fatal("a has no send queue toward b for topic traffic")
	}
	if st.Depth != 5 || st.Overflowed != 7 {
		t.Fatalf("a's send queue toward b: depth %d, overflowed %d; want 5 and 7", st.Depth, st.Overflowed)
	}
	if got := scrape(t, a)[`petrel_queue_overflowed_total{queue="_petrel.topics@b"}`]; got != 7 {
		t.Fatalf("petrel_queue_overflowed_total for a's send queue toward b: %v, want 7", got)
	}
	// petrel topics shows it too.
	code, body := adminGet(t, a, adminapi.PathTopics)
	var topics adminapi.Topics
	if err := json.Unmarshal([]byte(body), &topics); code != 200 || err != nil {
		t.Fatalf("GET %s: %d %v %s", adminapi.PathTopics, code, err, body)
	}
	want := []adminapi.Forward{{Neighbour: "b", Queue: "_petrel.topics@b", Depth: 5, MaxQueued: 5, Overflowed: 7}}
	if !slices.Equal(topics.Forwards, want) {
		t.Fatalf("forwards in %s: %+v, want %+v", adminapi.PathTopics, topics.Forwards, want)
	}
	b := openB()
	drainSub(t, subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true}), bodies[:5], a)

	_, err := petrel.Open(context.Background(), petrel.Config{Name: "c", DataDir: t.TempDir(), TopicForwardMaxQueued: 100})
	if err == nil || !strings.Contains(err.Error(), "topic_forward_max_queued") || !strings.Contains(err.Error(), "link.window") {
		t.Fatalf("a bound below the default window of 4096: %v, want an error naming topic_forward_max_queued and link.window", err)
	}
}

// With topic_forward_overflow drop_oldest the send queue toward an absent
// neighbour keeps the latest publishes: the janitor drops the oldest past
// the bound, counted, and keeps the interest messages among them, which
// the neighbour then learns. Here 20 of them, from a's own subscriptions
// made while b is away, are the oldest rows, more than the janitor reads
// at first.
func TestTopicForwardDropOldest(t *testing.T) {
	a, openB := absentNeighbour(t, 30, "drop_oldest")
	for i := range 20 {
		subscribe(t, a, fmt.Sprintf("orders.k%d.#", i), petrel.SubscribeOptions{Name: fmt.Sprint("local-", i), Durable: true}).Close()
	}
	bodies := publishN(t, a, "orders.eu.created", 12)
	var st petrel.QueueStats
	petreltest.Eventually(t, "a's send queue toward b trimmed to its bound", func() bool {
		st, _ = a.QueueStat("_petrel.topics@b")
		return st.Depth == 30
	}, func() string { return fmt.Sprintf("%+v", st) })
	if st.Overflowed != 2 {
		t.Fatalf("a's send queue toward b counts %d dropped, want 2: the 20 interest messages and the last 10 publishes stay", st.Overflowed)
	}
	if got := scrape(t, a)[`petrel_queue_overflowed_total{queue="_petrel.topics@b"}`]; got != 2 {
		t.Fatalf("petrel_queue_overflowed_total for a's send queue toward b: %v, want 2", got)
	}
	b := openB()
	drainSub(t, subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true}), bodies[2:], a)
	waitInterest(t, b, "a/a/orders.k0.#", "a/a/orders.k19.#")
}

// absentNeighbour opens b, with the durable subscription audit to
// orders.#, and a, which learns that interest, with a link window of 4
// and a bound on what waits toward b (overflow the policy past it); then
// closes b. It returns a, and how to open b again.
func absentNeighbour(t *testing.T, bound int64, overflow string) (a *petrel.Node, openB func() *petrel.Node) {
	t.Helper()
	m := newMesh(t, "a", "b")
	dirB := filepath.Join(t.TempDir(), "b")
	openB = func() *petrel.Node { return m.open(t, "b", dirB, "a") }
	b := openB()
	a = nodes.Open(t, nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + m["b"]}}
		c.Link.Window = 4
		c.TopicForwardMaxQueued = bound
		c.TopicForwardOverflow = overflow
	}))
	subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true}).Close()
	waitInterest(t, a, "b/b/orders.#")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return a, openB
}
