package petrel

import (
	"context"
	"encoding/json"
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
func openHub(t testing.TB) *Node {
	t.Helper()
	return openHubAt(t, t.TempDir())
}

// openHubAt opens the hub on dir, with nodes as its neighbours.
func openHubAt(t testing.TB, dir string, nodes ...NodeConfig) *Node {
	t.Helper()
	n, err := Open(context.Background(), Config{Name: "hub", DataDir: dir, Topics: []TopicConfig{{Pattern: "orders.#"}},
		Nodes: nodes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Each piece of learned interest is stored under a key of its own, so
// that what one interest message writes does not grow with all that is
// known; a store an older build wrote, every piece in one value, is moved
// to that form at open, and the pieces survive restarts either way.
func TestInterestStoredPieceByPiece(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := openHubAt(t, dir)
	for i := range 200 {
		if err := n.applyInterest(ctx, n.interestMessage(opSubscribe, fmt.Sprintf("orders.p%d", i), "plant-7", true, []string{"plant-7"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.applyInterest(ctx, n.interestMessage(opUnsub, "orders.p0", "plant-7", true, []string{"plant-7"})); err != nil {
		t.Fatal(err)
	}
	keys, values, err := n.store.MetaPrefix(ctx, metaInterestPrefix)
	if err != nil || len(keys) != 199 {
		t.Fatalf("%d pieces stored, %v; want 199", len(keys), err)
	}
	for i, v := range values {
		if len(v) > 200 {
			t.Fatalf("piece %s is stored in %d bytes; want one piece's", keys[i], len(v))
		}
	}
	// An older build's store: every piece under metaInterest.
	legacy, _ := json.Marshal([]*interestRecord{{Neighbour: "plant-9", Node: "plant-9", Pattern: "orders.old", Durable: true, Hops: []string{"plant-9"}}})
	if err := n.store.SetMeta(ctx, metaInterest, legacy); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openHubAt(t, dir)
	if got := len(n.TopicInterest()); got != 200 {
		t.Fatalf("%d pieces after the restart; want 199 and the older build's one", got)
	}
	// The loaded pieces are found by topic, the moved one too.
	for topic, want := range map[string]string{"orders.p5": "[plant-7]", "orders.old": "[plant-9]", "orders.p0": "[]"} {
		if got := fmt.Sprint(n.topics.remote.nextHops(topic, nil)); got != want {
			t.Fatalf("next hops of %s after the restart: %s, want %s", topic, got, want)
		}
	}
	if v, err := n.store.Meta(ctx, metaInterest); v != nil || err != nil {
		t.Fatalf("the older build's key is still there: %q, %v", v, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openHubAt(t, dir)
	if got := len(n.TopicInterest()); got != 200 {
		t.Fatalf("%d pieces after a second restart; want 200", got)
	}
}

// BenchmarkApplyInterest is one neighbour's subscribe and unsubscribe of
// a pattern, with 5,000 pieces of interest known: an op is the pair.
func BenchmarkApplyInterest(b *testing.B) {
	ctx := context.Background()
	n := openHub(b)
	learnPatterns(b, n, 5000)
	b.ResetTimer()
	for range b.N {
		for _, op := range []string{opSubscribe, opUnsub} {
			if err := n.applyInterest(ctx, n.interestMessage(op, "orders.flap", "plant-8", false, []string{"plant-8"})); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkNextHopsMiss finds the next hops of a topic the cache does
// not hold, among 5,000 pieces of learned interest, one per topic.
func BenchmarkNextHopsMiss(b *testing.B) {
	n := openHub(b)
	learnPatterns(b, n, 5000)
	it := &n.topics.remote
	b.ResetTimer()
	for i := range b.N {
		it.mu.RLock()
		out := it.scan(fmt.Sprintf("orders.p%d", (i*7919)%5000), nil)
		it.mu.RUnlock()
		if len(out) != 1 {
			b.Fatalf("next hops %v", out)
		}
	}
}

// learnPatterns has n learn count pieces of durable interest from
// plant-7, orders.p0 to orders.p<count-1>.
func learnPatterns(t testing.TB, n *Node, count int) {
	t.Helper()
	for i := range count {
		if err := n.applyInterest(context.Background(), n.interestMessage(opSubscribe, fmt.Sprintf("orders.p%d", i), "plant-7", true, []string{"plant-7"})); err != nil {
			t.Fatal(err)
		}
	}
}
