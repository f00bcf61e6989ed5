package petrel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// keepNode opens a node on dir whose space orders.# keeps what matches
// no subscription, with an admin listener for its metrics.
func keepNode(t *testing.T, dir string, keep petrel.TopicKeep, opts ...nodes.Option) *petrel.Node {
	t.Helper()
	return nodes.Open(t, append([]nodes.Option{nodes.With(withAdmin), nodes.With(func(c *petrel.Config) {
		c.DataDir = dir
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#", Keep: keep}, {Pattern: "alerts.#"}}
	})}, opts...)...)
}

func waitMetric(t *testing.T, n *petrel.Node, series string, want float64) {
	t.Helper()
	var got float64
	petreltest.Eventually(t, fmt.Sprintf("%s = %v", series, want), func() bool {
		got = scrape(t, n)[series]
		return got == want
	}, func() string { return fmt.Sprintf("%s = %v", series, got) })
}

// Publishes that match no subscription are held, up to keep.messages,
// the oldest dropped first and counted; the hold survives a restart, and
// the first durable subscription made later whose pattern matches takes
// them in order. A non-durable one, or a later durable one, does not.
func TestTopicKeepHoldsForLateDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n")
	n := keepNode(t, dir, petrel.TopicKeep{Messages: 5})
	var bodies []string
	for i := range 8 {
		bodies = append(bodies, fmt.Sprintf("m%d", i))
		publish(t, n, "orders.eu.created", bodies[i], nil)
	}
	publish(t, n, "orders.us.created", "us", nil)
	publish(t, n, "alerts.disk", "no keep here", nil)
	// 9 held, then the janitor drops the 4 oldest (the gauge falls as the
	// trim commits, the counter moves just after: wait for the counter).
	waitMetric(t, n, `petrel_topic_keep_dropped_total{reason="messages"}`, 4)
	m := scrape(t, n)
	if m["petrel_topic_kept_total"] != 9 || m[`petrel_topic_keep_held{space="orders.#"}`] != 5 || m["petrel_topic_unrouted_total"] != 1 {
		t.Fatalf("kept %v, held %v, unrouted %v; want 9, 5, 1", m["petrel_topic_kept_total"],
			m[`petrel_topic_keep_held{space="orders.#"}`], m["petrel_topic_unrouted_total"])
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = keepNode(t, dir, petrel.TopicKeep{Messages: 5})
	if got := takeAll(t, subscribe(t, n, "orders.eu.*", petrel.SubscribeOptions{})); len(got) != 0 {
		t.Fatalf("a non-durable subscription took held publishes %v", got)
	}
	audit := subscribe(t, n, "orders.eu.*", petrel.SubscribeOptions{Name: "audit", Durable: true})
	if got, want := takeAll(t, audit), bodies[4:]; !slices.Equal(got, want) {
		t.Fatalf("the late durable subscription got %v, want the four newest of its pattern (the fifth held is orders.us.created), in order, %v", got, want)
	}
	late := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "late", Durable: true})
	if got := takeAll(t, late); !slices.Equal(got, []string{"us"}) {
		t.Fatalf("the second durable subscription got %v, want only what the first left: [us]", got)
	}
	waitMetric(t, n, `petrel_topic_keep_held{space="orders.#"}`, 0)
	if got := scrape(t, n)["petrel_topic_keep_taken_total"]; got != 5 {
		t.Fatalf("petrel_topic_keep_taken_total = %v, want 5", got)
	}
}

// Held publishes older than keep.age are dropped, counted.
func TestTopicKeepAge(t *testing.T) {
	var clk clock
	n := keepNode(t, filepath.Join(t.TempDir(), "n"), petrel.TopicKeep{Messages: 100, Age: time.Hour}, clk.option())
	publish(t, n, "orders.eu.created", "old-1", nil)
	publish(t, n, "orders.eu.created", "old-2", nil)
	clk.advance(time.Hour / 2)
	publish(t, n, "orders.eu.created", "young", nil)
	clk.advance(time.Hour/2 + time.Minute)
	waitMetric(t, n, `petrel_topic_keep_dropped_total{reason="age"}`, 2)
	audit := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	if got := takeAll(t, audit); !slices.Equal(got, []string{"young"}) {
		t.Fatalf("got %v, want [young]", got)
	}
}

// Past keep.messages the publishes stored first go, whatever their
// priority; the bound reads only the head of each priority, and a burst
// of several thousand ends at the bound too.
func TestTopicKeepDropsOldestOfAnyPriority(t *testing.T) {
	n := keepNode(t, filepath.Join(t.TempDir(), "n"), petrel.TopicKeep{Messages: 3})
	for _, p := range []struct {
		body string
		prio uint8
	}{{"a", 9}, {"b", 0}, {"c", 4}, {"d", 9}, {"e", 0}} {
		publish(t, n, "orders.eu.created", p.body, func(m *message.Message) { m.Priority = p.prio })
	}
	waitMetric(t, n, `petrel_topic_keep_held{space="orders.#"}`, 3)
	audit := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "audit", Durable: true})
	if got := takeAll(t, audit); !slices.Equal(got, []string{"d", "c", "e"}) {
		t.Fatalf("got %v, want the three stored last, in priority order: [d c e]", got)
	}
	audit.Close()
	if err := n.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	publishAsync(t, n, "orders.eu.created", 5000)
	// The gauge falls as each trim commits, and the counter moves just
	// after: wait for the counter.
	waitMetric(t, n, `petrel_topic_keep_dropped_total{reason="messages"}`, 2+5000-3)
	if got := scrape(t, n)[`petrel_topic_keep_held{space="orders.#"}`]; got != 3 {
		t.Fatalf("petrel_topic_keep_held = %v after the burst, want 3", got)
	}
}
