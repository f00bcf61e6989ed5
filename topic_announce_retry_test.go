package petrel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A withdrawal of interest the store refused (full) is sent again by the
// topic janitor once the store has room. Before, the neighbour kept the
// interest, and went on forwarding, and queueing while this node was
// away, what no subscription here wanted, until the pattern's next
// subscription change or a restart. petrel_topic_announce_retries shows
// the pattern waiting.
func TestWithdrawalRetriedOnceTheStoreHasRoom(t *testing.T) {
	m := newMesh(t, "a", "b")
	b := m.open(t, "b", "", "a")
	a := nodes.Open(t, nodes.Name("a"), nodes.Listen(m["a"]), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		c.Nodes = append(c.Nodes, petrel.NodeConfig{Name: "b", Connector: "tcp://" + m["b"]})
		c.Store.MaxMessages = 20
		c.TopicInterestGrace = time.Second // a janitor tick of 100 ms
		c.Admin.Listen = "127.0.0.1:0"
	}))
	ctx := context.Background()
	hold, err := a.Subscribe(ctx, "orders.held.#", petrel.SubscribeOptions{Name: "hold", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Subscribe(ctx, "orders.gone.#", petrel.SubscribeOptions{Name: "gone", Durable: true}); err != nil {
		t.Fatal(err)
	}
	waitInterest(t, b, "a/a/orders.held.#", "a/a/orders.gone.#")

	p := a.Producer()
	held := 0
	for ; ; held++ {
		err := p.Send(ctx, p.CreateDataMessage("orders.held.x"))
		if errors.Is(err, petrel.ErrStoreFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Unsubscribe(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the withdrawal waiting", func() bool {
		return scrape(t, a)["petrel_topic_announce_retries"] == 1
	})
	time.Sleep(300 * time.Millisecond) // three janitor ticks: the store is still full
	if !learned(b, "a/a/orders.gone.#") {
		t.Fatal("b lost a's interest in orders.gone.# while a's store was full: the withdrawal went after all")
	}

	for range held {
		d, err := hold.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, "b forgot a's interest in orders.gone.#", func() bool {
		return !learned(b, "a/a/orders.gone.#") && learned(b, "a/a/orders.held.#")
	})
	if n := scrape(t, a)["petrel_topic_announce_retries"]; n != 0 {
		t.Fatalf("petrel_topic_announce_retries = %v once sent, want 0", n)
	}
}

// learned reports whether n learned the interest "neighbour/node/pattern".
func learned(n *petrel.Node, want string) bool {
	return slices.ContainsFunc(n.TopicInterest(), func(i petrel.InterestInfo) bool {
		return i.Neighbour+"/"+i.Node+"/"+i.Pattern == want
	})
}
