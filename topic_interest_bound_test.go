package petrel_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A neighbour that announces more patterns than a node keeps (its learned
// interest is bounded, maxLearnedInterest, here lowered to 3) fills it up
// to the bound over the link: the rest is dropped and counted in
// petrel_topic_interest_dropped_total, what is known stays and still
// routes publishes, and the link carries on.
func TestLearnedInterestBoundOverALink(t *testing.T) {
	m := newMesh(t, "a", "b")
	a := nodes.Open(t, nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
		c.Nodes = append(c.Nodes, petrel.NodeConfig{Name: "b", Connector: "tcp://" + m["b"]})
	}))
	petrel.SetLearnedInterestBound(a, 3)
	b := m.open(t, "b", "", "a")
	subs := make([]*petrel.Consumer, 5)
	for i := range subs {
		// One at a time, so that the first three are the ones a keeps.
		subs[i] = subscribe(t, b, fmt.Sprintf("orders.p%d.#", i), petrel.SubscribeOptions{Name: fmt.Sprintf("p%d", i), Durable: true})
		if i < 3 {
			waitInterest(t, a, fmt.Sprintf("b/b/orders.p%d.#", i))
		}
	}
	petreltest.Eventually(t, "two patterns dropped", func() bool {
		return scrape(t, a)["petrel_topic_interest_dropped_total"] == 2
	})
	var got []string
	for _, i := range a.TopicInterest() {
		got = append(got, i.Pattern)
	}
	slices.Sort(got)
	if want := []string{"orders.p0.#", "orders.p1.#", "orders.p2.#"}; !slices.Equal(got, want) {
		t.Fatalf("a learned %q, want %q", got, want)
	}
	// What a knows still routes; the link is up.
	publish(t, a, "orders.p2.created", "kept", nil)
	d := receive(t, subs[2])
	if string(d.Body) != "kept" {
		t.Fatalf("b's p2 got %q", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}
