package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// withTopics declares the topic spaces of the tests.
func withTopics(patterns ...string) nodes.Option {
	return nodes.With(func(c *petrel.Config) {
		for _, p := range patterns {
			c.Topics = append(c.Topics, petrel.TopicConfig{Pattern: p})
		}
	})
}

func subscribe(t *testing.T, n *petrel.Node, pattern string, opts petrel.SubscribeOptions) *petrel.Consumer {
	t.Helper()
	c, err := n.Subscribe(context.Background(), pattern, opts)
	if err != nil {
		t.Fatalf("subscribe %q: %v", pattern, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func publish(t *testing.T, n *petrel.Node, topic, body string, mod func(*message.Message)) *message.Message {
	t.Helper()
	p := n.Producer()
	m := p.CreateDataMessage(topic)
	m.Body = []byte(body)
	if mod != nil {
		mod(m)
	}
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatalf("publish to %q: %v", topic, err)
	}
	return m
}

// takeAll polls c until it has nothing ready, acking each, and returns the
// bodies in delivery order.
func takeAll(t *testing.T, c *petrel.Consumer) []string {
	t.Helper()
	var out []string
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			return out
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, string(d.Body))
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTopicFanOutMatching publishes to several topics and checks that
// each subscription got exactly what its pattern matches, once.
func TestTopicFanOutMatching(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#", "alerts.*"))
	patterns := []string{"orders.#", "orders.*", "orders.*.created", "orders.#.created", "#.created.#", "orders.eu.created", "alerts.*"}
	subs := map[string]*petrel.Consumer{}
	for _, p := range patterns {
		if p == "#.created.#" {
			continue // not within a space: see TestSubscribeErrors
		}
		subs[p] = subscribe(t, n, p, petrel.SubscribeOptions{})
	}
	topics := []string{"orders", "orders.eu", "orders.eu.created", "orders.eu.de.created", "orders.us.deleted", "alerts.disk"}
	for _, tp := range topics {
		publish(t, n, tp, tp, nil)
	}
	if err := n.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p, c := range subs {
		pat, err := address.ParsePattern(p)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, tp := range topics {
			if pat.Match(tp) {
				want = append(want, tp)
			}
		}
		if got := takeAll(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("subscription %q got %v, want %v", p, got, want)
		}
	}
}

// TestTopicFanOutMany publishes to N subscriptions, asynchronously.
func TestTopicFanOutMany(t *testing.T) {
	n := nodes.Open(t, withTopics("metrics.#"))
	const subs, msgs = 8, 200
	var cs []*petrel.Consumer
	for i := 0; i < subs; i++ {
		cs = append(cs, subscribe(t, n, "metrics.#", petrel.SubscribeOptions{Name: fmt.Sprintf("s%d", i), Durable: i%2 == 0}))
	}
	p := n.Producer()
	var pend []*petrel.Pending
	for i := 0; i < msgs; i++ {
		m := p.CreateDataMessage("metrics.cpu")
		m.Body = []byte(fmt.Sprint(i))
		pend = append(pend, p.SendAsync(m))
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		got := takeAll(t, c)
		if len(got) != msgs || got[0] != "0" || got[msgs-1] != fmt.Sprint(msgs-1) {
			t.Fatalf("subscription %d got %d messages (%v...), want %d in order", i, len(got), got[:min(3, len(got))], msgs)
		}
	}
}

// TestTopicCopiesIndependent: each subscription's delivery of a publish
// is its own message: a consumer that changes its properties or body
// changes no other subscription's, though the copies share one stored
// body and one decode of it.
func TestTopicCopiesIndependent(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	var cs []*petrel.Consumer
	for i := range 3 {
		cs = append(cs, subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: fmt.Sprintf("s%d", i), Durable: true}))
	}
	publish(t, n, "orders.eu", "body", func(m *message.Message) {
		m.Properties.Set("k", message.String("v"))
		m.TTL = time.Hour
	})
	for i, c := range cs {
		d, err := c.Receive(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := d.Properties.Get("k"); v.Str() != "v" || len(d.Properties) != 1 || string(d.Body) != "body" {
			t.Fatalf("subscription %d: %v %q, want the published properties and body", i, d.Properties, d.Body)
		}
		if d.TTL <= 0 || d.TTL > time.Hour {
			t.Fatalf("subscription %d: TTL %v, want what remains of an hour", i, d.TTL)
		}
		d.Properties.Set("k", message.String(fmt.Sprint("changed by ", i)))
		d.Properties.Set("added", message.Int32(int32(i)))
		d.Body[0] = 'X'
		d.TTL = 0
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTopicBatchCopiesIndependent: of the copies a ReceiveBatch hands
// out, decoded from bodies the subscriptions share, none can change
// another's: not by writing into its body, nor by appending to it.
func TestTopicBatchCopiesIndependent(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	cs := []*petrel.Consumer{
		subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "s0", Durable: true}),
		subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "s1", Durable: true}),
	}
	const count = 10
	for i := range count {
		publish(t, n, "orders.eu", fmt.Sprint("body-", i), nil)
	}
	for i, c := range cs {
		var ds []*petrel.Delivery
		for len(ds) < count {
			got, err := c.ReceiveBatch(context.Background(), count-len(ds))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, got...)
		}
		for j, d := range ds {
			if want := fmt.Sprint("body-", j); string(d.Body) != want {
				t.Fatalf("subscription %d, copy %d: %q, want %q (another copy changed it)", i, j, d.Body, want)
			}
			// Change this copy for the next ones to check against.
			d.Body[0] = 'X'
			d.Body = append(d.Body, "-appended"...)
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTopicUnrouted: a publish no subscription matches succeeds and
// stores nothing.
func TestTopicUnrouted(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	publish(t, n, "orders.eu", "nobody", nil)
	if err := n.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, _ := n.Store().Totals(); m != 0 {
		t.Fatalf("an unrouted publish stored %d messages", m)
	}
	c := subscribe(t, n, "orders.#", petrel.SubscribeOptions{})
	if got := takeAll(t, c); len(got) != 0 {
		t.Fatalf("a subscription made after the publish got %v", got)
	}
}

// TestSubscribeDurableAcrossRestart: what is published while no consumer
// is attached, and before a restart, is there after it; the subscription
// is back under its name with its pattern.
func TestSubscribeDurableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	opts := []nodes.Option{withTopics("orders.#"), nodes.With(func(c *petrel.Config) { c.DataDir = dir })}
	n := nodes.Open(t, opts...)
	durable := petrel.SubscribeOptions{Name: "audit", Durable: true}
	c := subscribe(t, n, "orders.#", durable)
	publish(t, n, "orders.a", "1", nil)
	c.Close() // no consumer attached from here on
	publish(t, n, "orders.b", "2", nil)
	publish(t, n, "billing", "not a topic", nil) // an ordinary address
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = nodes.Open(t, opts...)
	subs := n.Subscriptions()
	if len(subs) != 1 || subs[0].Name != "audit" || subs[0].Pattern != "orders.#" || !subs[0].Durable || subs[0].Depth != 2 {
		t.Fatalf("subscriptions after restart: %+v", subs)
	}
	publish(t, n, "orders.c", "3", nil)
	if _, err := n.Subscribe(context.Background(), "orders.*", durable); !errors.Is(err, petrel.ErrSubscription) {
		t.Fatalf("durable name reused with another pattern: %v, want ErrSubscription", err)
	}
	c = subscribe(t, n, "orders.#", durable)
	if got := takeAll(t, c); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("durable subscription got %v after restart, want [1 2 3]", got)
	}
	// Unsubscribe deletes it, for good.
	c.Close()
	if err := n.Unsubscribe(context.Background(), "audit"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = nodes.Open(t, opts...)
	if subs := n.Subscriptions(); len(subs) != 0 {
		t.Fatalf("unsubscribed subscription back after restart: %+v", subs)
	}
}

// TestSubscribeShared: consumers of one subscription compete, each
// message going to one of them; another subscription still gets all.
func TestSubscribeShared(t *testing.T) {
	n := nodes.Open(t, withTopics("jobs.#"))
	shared := petrel.SubscribeOptions{Name: "workers", Durable: true}
	c1 := subscribe(t, n, "jobs.#", shared)
	c2 := subscribe(t, n, "jobs.#", shared)
	other := subscribe(t, n, "jobs.#", petrel.SubscribeOptions{})
	const total = 100
	for i := 0; i < total; i++ {
		publish(t, n, "jobs.build", fmt.Sprint(i), nil)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var per [2]atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var taken atomic.Int64
	for i, c := range []*petrel.Consumer{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for taken.Load() < total {
				d, err := c.Poll()
				if errors.Is(err, petrel.ErrNoMessage) {
					if ctx.Err() != nil {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[string(d.Body)]++
				mu.Unlock()
				per[i].Add(1)
				taken.Add(1)
				if err := d.Ack(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("shared subscription delivered %d distinct messages, want %d", len(seen), total)
	}
	for b, k := range seen {
		if k != 1 {
			t.Fatalf("message %s delivered %d times", b, k)
		}
	}
	if got := per[0].Load() + per[1].Load(); got != total {
		t.Fatalf("consumers took %d, want %d", got, total)
	}
	if got := takeAll(t, other); len(got) != total {
		t.Fatalf("the other subscription got %d, want %d", len(got), total)
	}
	// Closing one consumer of a shared subscription leaves it to the other.
	c1.Close()
	publish(t, n, "jobs.build", "after", nil)
	if got := takeAll(t, c2); fmt.Sprint(got) != "[after]" {
		t.Fatalf("remaining consumer got %v", got)
	}
	takeAll(t, other)
}

// TestSubscribeNonDurableCleanup: a non-durable subscription's queue is
// gone once its consumer closes, and later publishes store nothing for it.
func TestSubscribeNonDurableCleanup(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	c, err := n.Subscribe(context.Background(), "orders.#", petrel.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subs := n.Subscriptions()
	if len(subs) != 1 || subs[0].Durable || subs[0].Consumers != 1 {
		t.Fatalf("subscriptions: %+v", subs)
	}
	qname := subs[0].Queue
	if qname != c.Address() {
		t.Fatalf("consumer address %q, subscription queue %q", c.Address(), qname)
	}
	publish(t, n, "orders.a", "held", nil)
	c.Close()
	if _, ok := n.QueueStat(qname); ok {
		t.Fatalf("queue %s still there after its only consumer closed", qname)
	}
	if subs := n.Subscriptions(); len(subs) != 0 {
		t.Fatalf("subscriptions after close: %+v", subs)
	}
	publish(t, n, "orders.b", "dropped", nil)
	if err := n.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, _ := n.Store().Totals(); m != 0 {
		t.Fatalf("store holds %d messages after the subscription ended", m)
	}
	if _, err := c.Poll(); err == nil {
		t.Fatal("poll on a closed non-durable subscription succeeded")
	}
}

// TestSubscribePriorityAndTTL: each subscription orders by priority and
// never delivers an expired copy.
func TestSubscribePriorityAndTTL(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := nodes.Open(t, withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		c.Store.Now = func() time.Time { return time.Unix(0, now.Load()) }
	}))
	a := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "a", Durable: true})
	b := subscribe(t, n, "orders.*", petrel.SubscribeOptions{Name: "b"})
	publish(t, n, "orders.x", "low", func(m *message.Message) { m.Priority = 1 })
	publish(t, n, "orders.x", "short", func(m *message.Message) { m.TTL = time.Second })
	publish(t, n, "orders.x", "high", func(m *message.Message) { m.Priority = 9 })
	publish(t, n, "orders.x", "mid", nil)
	now.Add(int64(2 * time.Second))
	for name, c := range map[string]*petrel.Consumer{"a": a, "b": b} {
		if got := takeAll(t, c); fmt.Sprint(got) != "[high mid low]" {
			t.Errorf("subscription %s got %v, want [high mid low] (short expired)", name, got)
		}
	}
}

// TestTopicAllOrNone: a publish that cannot store every copy stores none.
func TestTopicAllOrNone(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"), nodes.With(func(c *petrel.Config) { c.Store.MaxMessages = 4 }))
	var cs []*petrel.Consumer
	for i := 0; i < 3; i++ {
		cs = append(cs, subscribe(t, n, "orders.#", petrel.SubscribeOptions{}))
	}
	publish(t, n, "orders.a", "fits", nil) // 3 of 4
	p := n.Producer()
	m := p.CreateDataMessage("orders.b")
	if err := p.Send(context.Background(), m); !errors.Is(err, petrel.ErrStoreFull) {
		t.Fatalf("publish past the limit = %v, want ErrStoreFull", err)
	}
	if m, _ := n.Store().Totals(); m != 3 {
		t.Fatalf("store holds %d messages after a refused publish, want 3", m)
	}
	for _, c := range cs {
		if got := takeAll(t, c); fmt.Sprint(got) != "[fits]" {
			t.Fatalf("got %v, want [fits]", got)
		}
	}
	// And once the node closed, nothing is stored either.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), p.CreateDataMessage("orders.c")); err == nil {
		t.Fatal("publish on a closed node succeeded")
	}
}

// TestSubscribeErrors: what Subscribe and Send refuse, and why.
func TestSubscribeErrors(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	ctx := context.Background()
	for _, tc := range []struct {
		pattern string
		opts    petrel.SubscribeOptions
		want    error
	}{
		{"orders..x", petrel.SubscribeOptions{}, address.ErrTopicPattern},
		{"orders.x*", petrel.SubscribeOptions{}, address.ErrTopicPattern},
		{"#", petrel.SubscribeOptions{}, petrel.ErrNoTopicSpace},
		{"billing.*", petrel.SubscribeOptions{}, petrel.ErrNoTopicSpace},
		{"orders.#", petrel.SubscribeOptions{Durable: true}, petrel.ErrSubscription},
		{"orders.#", petrel.SubscribeOptions{Name: "bad name"}, petrel.ErrSubscription},
	} {
		if _, err := n.Subscribe(ctx, tc.pattern, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("Subscribe(%q, %+v) = %v, want %v", tc.pattern, tc.opts, err, tc.want)
		}
	}
	// A name is one subscription: durable and not cannot share it.
	subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "s"})
	if _, err := n.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "s", Durable: true}); !errors.Is(err, petrel.ErrSubscription) {
		t.Errorf("durable over a non-durable name: %v", err)
	}
	if err := n.Unsubscribe(ctx, "s"); !errors.Is(err, petrel.ErrSubscription) {
		t.Errorf("Unsubscribe of a non-durable subscription: %v", err)
	}
	// A topic is not a queue, and takes no files.
	if _, err := n.Consumer("orders.eu"); !errors.Is(err, petrel.ErrNotReceive) {
		t.Errorf("Consumer of a topic: %v, want ErrNotReceive", err)
	}
	p := n.Producer()
	f := p.CreateFileMessage("orders.eu")
	f.File.SendFilePath = "/nonexistent"
	if err := p.Send(ctx, f); !errors.Is(err, petrel.ErrFileToTopic) {
		t.Errorf("file to a topic: %v, want ErrFileToTopic", err)
	}
	if err := p.SendAsync(p.CreateFileMessage("orders.eu")).Wait(ctx); !errors.Is(err, petrel.ErrFileToTopic) {
		t.Errorf("async file to a topic: %v, want ErrFileToTopic", err)
	}
}

// TestTopicFromClientAndLink: a client's publish and a neighbour's
// message to a topic are fanned out like a local publish, to the node's
// subscriptions and to a client's.
func TestTopicFromClientAndLink(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#"))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	s1 := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "one", Durable: true})
	s2 := subscribe(t, b, "orders.*", petrel.SubscribeOptions{Name: "two", Durable: true})
	cl := nodes.Dial(t, b, petrel.DialOptions{})
	ctx := context.Background()
	s3, err := cl.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{})
	if err != nil {
		t.Fatalf("client Subscribe: %v", err)
	}
	t.Cleanup(func() { s3.Close() })
	cp := cl.Producer()
	m := cp.CreateDataMessage("orders.client")
	m.Body = []byte("from client")
	if err := cp.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	ap := a.Producer()
	m = ap.CreateDataMessage("orders.link@b")
	m.Body = []byte("from a")
	if err := ap.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*petrel.Consumer{"one": s1, "two": s2, "client": s3} {
		got := map[string]bool{}
		for len(got) < 2 {
			d := receive(t, c)
			got[string(d.Body)] = true
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if !got["from client"] || !got["from a"] {
			t.Fatalf("subscription %s got %v", name, got)
		}
	}
}

// TestSubscriptionDeadLetterReplay: a subscription dead-letters into its
// own dead-letter queue, and a replay goes back to that subscription only.
func TestSubscriptionDeadLetterReplay(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	ctx := context.Background()
	a := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "a", Durable: true, Policy: petrel.QueuePolicy{MaxDeliveries: 1}})
	b := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "b", Durable: true})
	publish(t, n, "orders.x", "poison", nil)
	d := receive(t, a)
	if err := d.Nack("cannot"); err != nil {
		t.Fatal(err)
	}
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st, ok := n.QueueStat("sub:a.dlq"); !ok || st.Depth != 1 {
		t.Fatalf("dead-letter queue of a: %+v %v", st, ok)
	}
	if got, err := n.Replay(ctx, "sub:a", 0); err != nil || got != 1 {
		t.Fatalf("replay = %d, %v", got, err)
	}
	if got := takeAll(t, a); fmt.Sprint(got) != "[poison]" {
		t.Fatalf("a after replay: %v", got)
	}
	if got := takeAll(t, b); fmt.Sprint(got) != "[poison]" {
		t.Fatalf("b got %v, want the one copy it had", got)
	}
}

// TestSubscriptionsShareTheQueueCap: every subscription is a queue made on
// demand, so subscriptions count against max_auto_queues like queues made
// on first use; past it Subscribe fails with ErrTooManyQueues.
func TestSubscriptionsShareTheQueueCap(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"), nodes.With(func(c *petrel.Config) { c.MaxAutoQueues = 3 }))
	ctx := context.Background()
	var err error
	made := 0
	for i := range 5 {
		var c *petrel.Consumer
		c, err = n.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: fmt.Sprintf("s%d", i), Durable: true})
		if err != nil {
			break
		}
		defer c.Close()
		made++
	}
	if !errors.Is(err, petrel.ErrTooManyQueues) || made == 0 || made > 3 {
		t.Fatalf("%d subscriptions made, then %v; want at most 3, then ErrTooManyQueues", made, err)
	}
}

// The cache of topic matches shows in /metrics: its names, and the
// publishes it answered.
func TestMatchCacheMetrics(t *testing.T) {
	n := nodes.Open(t, withTopics("t.#"), nodes.With(withAdmin))
	subscribe(t, n, "t.#", petrel.SubscribeOptions{Name: "s", Durable: true})
	p := n.Producer()
	for _, topic := range []string{"t.a", "t.a", "t.a", "t.b"} {
		if err := p.Send(context.Background(), p.CreateDataMessage(topic)); err != nil {
			t.Fatal(err)
		}
	}
	m := scrape(t, n)
	if m["petrel_topic_match_cache_entries"] != 2 || m["petrel_topic_match_cache_hits_total"] != 2 {
		t.Fatalf("cache entries %v, hits %v; want 2 and 2", m["petrel_topic_match_cache_entries"], m["petrel_topic_match_cache_hits_total"])
	}
	// A publisher to ever new topic names grows the cache to its bound,
	// 4,096 names, not past it.
	for i := range 5000 {
		if err := p.Send(context.Background(), p.CreateDataMessage(fmt.Sprintf("t.x.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := scrape(t, n)["petrel_topic_match_cache_entries"]; got < 1 || got > 4096 {
		t.Fatalf("cache entries %v after 5,000 new topic names, want 1 to 4,096", got)
	}
}

// TestSubscriptionNamedLikeADeadLetterQueue: a subscription may not be
// named "<x>.dlq", whose queue sub:<x>.dlq is subscription x's dead-letter
// queue, nor have its dead letters go to another subscription's queue. A
// subscription "d.dlq" was accepted before, and dlq list and replay of d
// then took its live messages.
func TestSubscriptionNamedLikeADeadLetterQueue(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	ctx := context.Background()
	d := subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: "d", Durable: true})
	for _, opts := range []petrel.SubscribeOptions{
		{Name: "d.dlq", Durable: true},
		{Name: "d.dlq"},
		{Name: "never.made.dlq", Durable: true},
	} {
		_, err := n.Subscribe(ctx, "orders.eu.*", opts)
		if !errors.Is(err, petrel.ErrSubscription) || !strings.Contains(err.Error(), "would be the dead-letter queue of subscription") {
			t.Errorf("Subscribe as %q (durable %v): %v, want ErrSubscription saying why", opts.Name, opts.Durable, err)
		}
	}
	_, err := n.Subscribe(ctx, "orders.eu.*", petrel.SubscribeOptions{Name: "e", Policy: petrel.QueuePolicy{DeadLetter: "sub:d"}})
	if !errors.Is(err, petrel.ErrSubscription) || !strings.Contains(err.Error(), `queue of subscription "d"`) {
		t.Errorf("Subscribe dead-lettering into sub:d: %v, want ErrSubscription", err)
	}
	publish(t, n, "orders.eu.x", "m1", nil)
	if got := n.Subscriptions(); len(got) != 1 || got[0].Name != "d" {
		t.Fatalf("subscriptions %+v, want d alone", got)
	}
	if dl, err := n.DeadLetters(ctx, "sub:d", 0); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters of sub:d: %d, %v; want none", len(dl), err)
	}
	if got := takeAll(t, d); len(got) != 1 || got[0] != "m1" {
		t.Fatalf("d got %q, want m1", got)
	}
}

// TestSendToInvalidTopicNameInSpace: a name that a topic space matches
// word by word but that is not a topic name ("orders..eu", "orders.",
// "orders.-x" in orders.#) is refused, saying why, from the Go API, the
// admin API (400) and a neighbour (dead-lettered with the reason), and
// is no address to consume from either. Each became an anycast queue on
// first use before, where no subscription looked.
func TestSendToInvalidTopicNameInSpace(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#"), nodes.With(withAdmin))
	all := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	ctx := context.Background()
	p := b.Producer()
	bad := []string{"orders..eu", "orders.", "orders.-x"}
	for _, name := range bad {
		m := p.CreateDataMessage(name)
		m.Body = []byte("typo")
		err := p.Send(ctx, m)
		if !errors.Is(err, address.ErrTopicName) || !strings.Contains(err.Error(), `invalid topic name inside topic space "orders.#"`) {
			t.Errorf("send to %q: %v, want ErrTopicName saying it is inside orders.#", name, err)
		}
		if err := p.SendAsync(p.CreateDataMessage(name)).Wait(ctx); !errors.Is(err, address.ErrTopicName) {
			t.Errorf("async send to %q: %v, want ErrTopicName", name, err)
		}
		if _, err := b.Consumer(name); !errors.Is(err, address.ErrTopicName) {
			t.Errorf("consumer of %q: %v, want ErrTopicName", name, err)
		}
		code, raw := apiCall(t, b, "POST", "/api/send", adminapi.SendRequest{To: name, Body: []byte("typo")}, nil)
		if code != http.StatusBadRequest || !strings.Contains(raw, "invalid topic name inside topic space") {
			t.Errorf("POST /api/send to %q: %d %s, want 400 saying why", name, code, raw)
		}
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	sendOne(t, a, "orders..eu@b", "typo from a")
	if d := deadLetter(t, a, "orders..eu.dlq"); !strings.Contains(d.Reason, `invalid topic name inside topic space "orders.#"`) {
		t.Errorf("a's dead letter: reason %q", d.Reason)
	}
	publish(t, b, "orders.eu", "fine", nil)
	if got := takeAll(t, all); len(got) != 1 || got[0] != "fine" {
		t.Errorf("all got %q, want the valid publish alone", got)
	}
	for _, name := range bad {
		if _, ok := b.QueueStat(name); ok {
			t.Errorf("b made the queue %q", name)
		}
	}
	cfg := petrel.Config{Name: "n", Topics: []petrel.TopicConfig{{Pattern: "orders.#"}}, Addresses: []petrel.AddressConfig{{Name: "orders.-x", Role: address.RoleReceive}}}
	if err := cfg.Validate(); !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), "invalid topic name") {
		t.Errorf("declaring orders.-x beside orders.#: %v, want a configuration error", err)
	}
}

// TestSubscribeErrorsNameTheCharacter: a pattern or a subscription name
// with a character it may not hold is refused naming that character, not
// the first byte of its UTF-8 encoding ('é' was named 'Ã').
func TestSubscribeErrorsNameTheCharacter(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#"))
	ctx := context.Background()
	for _, tc := range []struct {
		pattern, name, want string
	}{
		{"orders.café", "", `word "café" has 'é'`},
		{"orders.東京", "", `word "東京" has '東'`},
		{"orders.#", "café", `has 'é'`},
	} {
		_, err := n.Subscribe(ctx, tc.pattern, petrel.SubscribeOptions{Name: tc.name})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Ã") || strings.Contains(err.Error(), "æ") {
			t.Errorf("Subscribe(%q) as %q: %v, want it to say %s", tc.pattern, tc.name, err, tc.want)
		}
	}
}
