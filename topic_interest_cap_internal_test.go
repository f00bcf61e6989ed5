package petrel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
)

// A neighbour that announces pattern after pattern fills the learned
// interest only up to its bound; what is known stays, the rest is dropped
// and counted.
func TestLearnedInterestIsBounded(t *testing.T) {
	ctx := context.Background()
	n := openHub(t)
	n.topics.remote.max = 3
	for i := range 5 {
		m := n.interestMessage(opSubscribe, fmt.Sprintf("orders.p%d", i), "plant-7", true, []string{"plant-7"})
		if err := n.applyInterest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(n.TopicInterest()); got != 3 {
		t.Fatalf("%d pieces of interest learned, want the bound, 3", got)
	}
	if got := n.topics.interestDropped.Load(); got != 2 {
		t.Fatalf("%d dropped, want 2", got)
	}
}

// The answers nextHops keeps follow every change of the learned interest:
// a publish asked before a neighbour subscribed, unsubscribed or had its
// non-durable interest dropped gets the new answer after.
func TestNextHopsFollowInterest(t *testing.T) {
	ctx := context.Background()
	n := openHub(t)
	it := &n.topics.remote
	want := func(when string, nbs ...string) {
		t.Helper()
		for range 2 { // the second answer is the kept one
			if got := it.nextHops("orders.eu", []string{"hub"}); fmt.Sprint(got) != fmt.Sprint(nbs) {
				t.Fatalf("%s: next hops %v, want %v", when, got, nbs)
			}
		}
	}
	apply := func(op, node string, durable bool) {
		t.Helper()
		if err := n.applyInterest(ctx, n.interestMessage(op, "orders.#", node, durable, []string{node})); err != nil {
			t.Fatal(err)
		}
	}
	want("before any interest")
	apply(opSubscribe, "plant-7", true)
	want("after plant-7 subscribed", "plant-7")
	apply(opSubscribe, "plant-8", false)
	want("after plant-8 subscribed", "plant-7", "plant-8")
	apply(opUnsub, "plant-7", true)
	want("after plant-7 unsubscribed", "plant-8")
	if !n.dropNonDurable(ctx, "plant-8") {
		t.Fatal("plant-8's non-durable interest was not dropped")
	}
	want("after plant-8's non-durable interest was dropped")
}

// openHub opens a node named hub with the topic space orders.#, closed
// when the test ends.
func openHub(t *testing.T) *Node {
	t.Helper()
	n, err := Open(context.Background(), Config{Name: "hub", DataDir: t.TempDir(), Topics: []TopicConfig{{Pattern: "orders.#"}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
