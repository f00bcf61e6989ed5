package petrel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// openTopicsNode opens a node on dir with the topic space orders.# and a
// neighbour that is never up, so that it announces its patterns.
func openTopicsNode(t testing.TB, dir string) *Node {
	t.Helper()
	return openHubAt(t, dir, NodeConfig{Name: "away", Connector: "tcp://127.0.0.1:1"})
}

// The durable subscriptions and the announced patterns an older build
// kept in one value each are moved to a key per record at open, and both
// forms give the same node.
func TestRecordsMovedFromOlderBuild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := openTopicsNode(t, dir)
	subs, _ := json.Marshal([]durableRecord{{Name: "audit", Pattern: "orders.#"}, {Name: "eu", Pattern: "orders.eu.*"}})
	announced, _ := json.Marshal([]string{"orders.#", "orders.eu.*"})
	for k, v := range map[string][]byte{metaSubscriptions: subs, metaAnnounced: announced} {
		if err := n.store.SetMeta(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		n = openTopicsNode(t, dir)
		if got := n.Subscriptions(); len(got) != 2 || got[0].Name != "audit" || got[1].Pattern != "orders.eu.*" {
			t.Fatalf("round %d: subscriptions %+v; want audit and eu", round, got)
		}
		for _, prefix := range []string{metaSubscriptionPrefix, metaAnnouncedPrefix} {
			if keys, _, err := n.store.MetaPrefix(ctx, prefix); err != nil || len(keys) != 2 {
				t.Fatalf("round %d: keys under %s: %v, %v; want 2", round, prefix, keys, err)
			}
		}
		for _, k := range []string{metaSubscriptions, metaAnnounced} {
			if v, err := n.store.Meta(ctx, k); v != nil || err != nil {
				t.Fatalf("round %d: the older build's %s is still there: %q, %v", round, k, v, err)
			}
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSubscribeJoin is a consumer joining, then leaving, a durable
// subscription that exists, on a node with 5,000 subscriptions of their
// own patterns and a neighbour to announce them to: what a persistent MQTT
// session's reconnect costs the node.
func BenchmarkSubscribeJoin(b *testing.B) {
	ctx := context.Background()
	n := openTopicsNode(b, b.TempDir())
	for i := range 5000 {
		c, err := n.Subscribe(ctx, fmt.Sprintf("orders.d%d", i), SubscribeOptions{Name: fmt.Sprint("s", i), Durable: true})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.ResetTimer()
	for range b.N {
		c, err := n.Subscribe(ctx, "orders.d7", SubscribeOptions{Name: "s7", Durable: true})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// FuzzNodeRecords: the records a node keeps in its store's meta table
// (its durable subscriptions, the patterns it announced, the interest it
// learned, each one record per key or in an older build's one list) are
// read back when it opens. Whatever a value holds (a disk fault, a
// foreign or older writer), the node opens or returns an error, and never
// panics. which picks the key; the seed corpus runs with the tests.
func FuzzNodeRecords(f *testing.F) {
	keys := []string{
		metaSubscriptionPrefix + "audit", metaSubscriptions,
		metaAnnouncedPrefix + "orders.#", metaAnnounced,
		metaInterestPrefix + "x", metaInterest,
	}
	for i := range keys {
		for _, seed := range []string{
			`{"name":"audit","pattern":"orders.#"}`, `[{"name":"audit","pattern":"orders.#"}]`,
			`"orders.#"`, `["orders.#"]`,
			`{"neighbour":"away","node":"plant-7","pattern":"orders.#","durable":true,"hops":["plant-7"]}`,
			`[{"neighbour":"away","node":"plant-7","pattern":"orders.#","hops":["plant-7"]}]`,
			`null`, `[null]`, `{}`, `[{}]`, `{"pattern":"orders..#"}`, `{`, ``,
		} {
			f.Add(uint8(i), []byte(seed))
		}
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		dir := t.TempDir()
		n := openTopicsNode(t, dir)
		if err := n.store.SetMeta(ctx, keys[int(which)%len(keys)], value); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Open(ctx, Config{Name: "hub", DataDir: dir, Topics: []TopicConfig{{Pattern: "orders.#"}},
			Nodes:  []NodeConfig{{Name: "away", Connector: "tcp://127.0.0.1:1"}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			again.Close()
		}
	})
}

// A durable subscription "<x>.dlq" that an older build made is loaded
// with what it holds, and each start warns, naming it and the
// subscription whose dead-letter queue its queue is.
func TestSubscriptionNamedLikeADeadLetterQueueFromOlderBuild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := openTopicsNode(t, dir)
	rec, _ := json.Marshal(durableRecord{Name: "d.dlq", Pattern: "orders.eu.*"})
	if err := n.store.SetMeta(ctx, metaSubscriptionPrefix+"d.dlq", rec); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &petreltest.SyncBuffer{}
	n, err := Open(ctx, Config{Name: "hub", DataDir: dir, Topics: []TopicConfig{{Pattern: "orders.#"}},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if got := n.Subscriptions(); len(got) != 1 || got[0].Name != "d.dlq" || got[0].Queue != "sub:d.dlq" {
		t.Fatalf("subscriptions %+v, want d.dlq kept", got)
	}
	s := logs.String()
	for _, want := range []string{"level=WARN", "subscription=d.dlq", "dead_letters_of=d"} {
		if !strings.Contains(s, want) {
			t.Fatalf("the log does not say %q:\n%s", want, s)
		}
	}
}

// A durable subscription stored before subscriptions had owners is taken
// by the first identity that joins it, as the MQTT gateway's sessions are,
// and that is stored: after a restart another identity is still refused.
// The node's own Subscribe joins it without taking it.
func TestSubscriptionWithoutOwnerFromOlderBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	dir := t.TempDir()
	open := func() *Node {
		n, err := Open(ctx, Config{Name: "hub", DataDir: dir, Listen: "127.0.0.1:0", Topics: []TopicConfig{{Pattern: "orders.#"}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	rec, _ := json.Marshal(durableRecord{Name: "old", Pattern: "orders.#"})
	if err := n.store.SetMeta(ctx, metaSubscriptionPrefix+"old", rec); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	join := func(n *Node, identity string) error {
		t.Helper()
		cl, err := Dial(ctx, "tcp://"+n.ListenAddr(), DialOptions{Name: identity, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		c, err := cl.Subscribe(ctx, "orders.#", SubscribeOptions{Name: "old", Durable: true})
		if err == nil {
			c.Close()
		}
		return err
	}
	n = open()
	own, err := n.Subscribe(ctx, "orders.#", SubscribeOptions{Name: "old", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	if err := join(n, "app-b"); err != nil {
		t.Fatalf("app-b, the first identity to join: %v", err)
	}
	for round := range 2 {
		if err := join(n, "app-a"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "taken by another identity") {
			t.Fatalf("round %d: app-a joining app-b's: %v; want refused", round, err)
		}
		if err := join(n, "app-b"); err != nil {
			t.Fatalf("round %d: app-b joining its own: %v", round, err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = open()
	}
	n.Close()
}
