package petrel

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// A publish finds its subscriptions in the cache of matching once the
// topic was published to, and every change of the subscriptions empties
// it: a subscription made, closed (non-durable), unsubscribed, or loaded
// at open gets exactly the publishes made while it existed.
func TestMatchCacheFollowsSubscriptions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Node {
		t.Helper()
		n, err := Open(ctx, Config{Name: "a", DataDir: dir, Logger: quietLog, Topics: []TopicConfig{{Pattern: "t.#"}}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	defer func() { n.Close() }()
	seq := 0
	publish := func() string {
		t.Helper()
		seq++
		body := fmt.Sprint("m", seq)
		m := n.Producer().CreateDataMessage("t.x")
		m.Body = []byte(body)
		if err := n.Producer().Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		return body
	}
	sub := func(pattern string, opts SubscribeOptions) *Consumer {
		t.Helper()
		c, err := n.Subscribe(ctx, pattern, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	got := func(c *Consumer) []string {
		t.Helper()
		var out []string
		for {
			d, err := c.Poll()
			if err != nil {
				return out
			}
			out = append(out, string(d.Body))
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := sub("t.#", SubscribeOptions{Name: "a", Durable: true})
	m1, m2 := publish(), publish()
	if h := n.topics.matched.hits.Load(); h != 1 {
		t.Fatalf("%d cache hits after two publishes to one topic, want 1", h)
	}
	b := sub("t.x", SubscribeOptions{})
	m3 := publish()
	if g := got(b); !slices.Equal(g, []string{m3}) {
		t.Fatalf("b got %v, want %v", g, []string{m3})
	}
	b.Close() // non-durable: gone with its consumer
	m4 := publish()
	if g := got(a); !slices.Equal(g, []string{m1, m2, m3, m4}) {
		t.Fatalf("a got %v, want %v", g, []string{m1, m2, m3, m4})
	}
	if err := n.Unsubscribe(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c := sub("t.*", SubscribeOptions{Name: "c", Durable: true})
	m5 := publish()
	if g := got(c); !slices.Equal(g, []string{m5}) {
		t.Fatalf("c got %v, want %v", g, []string{m5})
	}
	if st := n.topics.unrouted.Load(); st != 0 {
		t.Fatalf("%d publishes unrouted, want none", st)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// a, unsubscribed, is gone; c is loaded at open and gets what follows.
	n = open()
	m6 := publish()
	c = sub("t.*", SubscribeOptions{Name: "c", Durable: true})
	if g := got(c); !slices.Equal(g, []string{m6}) {
		t.Fatalf("c after the restart got %v, want %v", g, []string{m6})
	}
}
