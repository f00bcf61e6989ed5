package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// ownersConfig lists client identities app-a and app-b, each with a
// subscribe right on orders.#, on a node whose data directory is dir.
func ownersConfig(dir string) func(*petrel.Config) {
	return func(c *petrel.Config) {
		c.DataDir = dir
		withAdmin(c)
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#"}}
		c.Peers = []petrel.PeerConfig{
			{Name: "app-a", Secret: "secret-a", Kind: petrel.PeerKindClient},
			{Name: "app-b", Secret: "secret-b", Kind: petrel.PeerKindClient},
		}
		c.Access = []petrel.AccessRule{
			{Identity: "app-a", Subscribe: []string{"orders.#"}},
			{Identity: "app-b", Subscribe: []string{"orders.#"}},
		}
	}
}

// TestRemoteSubscriptionIsItsIdentitys: a remote client's named
// subscription is its identity's. Another identity subscribing under the
// name, with the same pattern or another, is refused with a reason that
// tells nothing of the subscription, counted, and takes nothing of what
// waits in it; the owner joins it again and gets it all, also after a
// restart (the owner is stored with the durable subscription). The node's
// own Subscribe joins any subscription, and a client may not join the
// node's.
func TestRemoteSubscriptionIsItsIdentitys(t *testing.T) {
	dir := t.TempDir()
	n := nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(ownersConfig(dir)), nodes.LeasesMayRemain())
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	a := nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "secret-a"})
	b := nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "secret-b"})
	c, err := a.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := range 10 {
		publish(t, n, "orders.x", fmt.Sprint("m", i), nil)
	}
	petreltest.Eventually(t, "billing to hold the 10 publishes", func() bool {
		s, _ := subscriptionInfo(n, "billing")
		return s.Depth == 10 && s.Consumers == 0
	})
	taken := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), `subscription name "billing" is taken by another identity`) {
			t.Fatalf("%s: %v; want a refusal saying the name is another identity's", what, err)
		}
		if strings.Contains(err.Error(), `"orders.#"`) && !strings.HasPrefix(what, "same") || strings.Contains(err.Error(), "app-a") {
			t.Fatalf("%s: the refusal tells of the other subscription: %v", what, err)
		}
	}
	_, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	taken("same pattern", err)
	_, err = b.Subscribe(ctx, "orders.eu.#", petrel.SubscribeOptions{Name: "billing"})
	taken("another pattern", err)
	if got := scrape(t, n)[`petrel_topic_subscriptions_refused_total{reason="taken"}`]; got != 2 {
		t.Fatalf("refused as taken: %v, want 2", got)
	}
	// The node's own subscription is the operator's: no client joins it.
	own, err := n.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "ops", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	_, err = a.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "ops", Durable: true})
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "taken by another identity") {
		t.Fatalf("app-a joining the node's subscription: %v; want refused", err)
	}
	// A mismatch on one's own subscription may name its pattern.
	_, err = a.Subscribe(ctx, "orders.eu.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), `exists with pattern "orders.#"`) {
		t.Fatalf("app-a with another pattern: %v; want the mismatch named", err)
	}
	if s, _ := subscriptionInfo(n, "billing"); s.Depth != 10 {
		t.Fatalf("billing holds %d after the refusals, want 10", s.Depth)
	}

	// A restart keeps the owner.
	b.Close()
	a.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(ownersConfig(dir)))
	b = nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "secret-b"})
	_, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	taken("same pattern, after a restart", err)
	a = nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "secret-a"})
	c, err = a.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]string, 10)
	for i := range want {
		want[i] = fmt.Sprint("m", i)
	}
	expectBodies(t, c, "app-a's billing", want...)
	// The node's own Subscribe joins any.
	nc, err := n.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	if err != nil {
		t.Fatalf("the node joining app-a's subscription: %v", err)
	}
	nc.Close()
}

// TestRemoteSubscriptionNamesOfTheMQTTGateway: a remote client may not
// name a subscription as the MQTT gateway names a session's or a shared
// group's, even where none exists yet: it would take the session's place.
func TestRemoteSubscriptionNamesOfTheMQTTGateway(t *testing.T) {
	n := nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(ownersConfig(t.TempDir())))
	b := nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "secret-b"})
	ctx := context.Background()
	for _, name := range []string{"mqtt.dashboard.66cd9688a2ae.ec3d515709dc", "mqtt-share.g.0011223344556677"} {
		_, err := b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: name, Durable: true})
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "MQTT gateway") {
			t.Fatalf("subscribe as %s: %v; want refused as the MQTT gateway's", name, err)
		}
	}
	if got := scrape(t, n)[`petrel_topic_subscriptions_refused_total{reason="reserved"}`]; got != 2 {
		t.Fatalf("refused as reserved: %v, want 2", got)
	}
	if subs := n.Subscriptions(); len(subs) != 0 {
		t.Fatalf("subscriptions %+v made", subs)
	}
}

// TestRemoteSubscriptionsPerIdentity: the remote clients of one identity
// own at most max_subscriptions_per_identity subscriptions at once,
// durable or not. Past it, a new name is refused with the reason and
// counted; joining one it owns is taken, another identity still
// subscribes, and a durable one the operator deletes gives its place back.
func TestRemoteSubscriptionsPerIdentity(t *testing.T) {
	n := nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(ownersConfig(t.TempDir())), nodes.With(func(c *petrel.Config) {
		c.MaxSubscriptionsPerIdentity = 3
	}))
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	b := nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "secret-b"})
	for i := range 2 {
		c, err := b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: fmt.Sprint("hog", i), Durable: true})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	private, err := b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "max_subscriptions_per_identity") || !strings.Contains(err.Error(), `"app-b" owns 3`) {
			t.Fatalf("%s: %v; want a refusal naming max_subscriptions_per_identity", what, err)
		}
	}
	_, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "hog2", Durable: true})
	refused("a fourth, durable", err)
	_, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{})
	refused("a fourth, non-durable", err)
	if got := scrape(t, n)[`petrel_topic_subscriptions_refused_total{reason="identity"}`]; got != 2 {
		t.Fatalf("refused past the identity's bound: %v, want 2", got)
	}
	// The operator sees whose they are (petrel topics, GET /api/topics).
	var topics adminapi.Topics
	mustAPI(t, n, "GET", adminapi.PathTopics, nil, &topics)
	owners := map[string]string{}
	for _, sub := range topics.Subscriptions {
		owners[sub.Name] = sub.Owner
	}
	if owners["hog0"] != "app-b" || owners["hog1"] != "app-b" {
		t.Fatalf("owners %v, want hog0 and hog1 app-b's", owners)
	}
	c, err := b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "hog0", Durable: true})
	if err != nil {
		t.Fatalf("joining its own: %v", err)
	}
	c.Close()
	a := nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "secret-a"})
	c, err = a.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "billing", Durable: true})
	if err != nil {
		t.Fatalf("another identity: %v", err)
	}
	c.Close()
	// Closing the private one, or deleting a durable one, gives room.
	private.Close()
	petreltest.Eventually(t, "the private subscription to end", func() bool { return len(n.Subscriptions()) == 3 })
	c, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "hog2", Durable: true})
	if err != nil {
		t.Fatalf("after the private one ended: %v", err)
	}
	c.Close()
	_, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "hog3", Durable: true})
	refused("past it again", err)
	// The operator deletes one through the admin API (petrel
	// unsubscribe): the client has no way to.
	checkAPIAnswer(t, n, "POST", adminapi.UnsubscribePath("hog0"), nil, http.StatusOK, "")
	checkAPIAnswer(t, n, "POST", adminapi.UnsubscribePath("hog0"), nil, http.StatusNotFound, "no durable subscription")
	c, err = b.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "hog3", Durable: true})
	if err != nil {
		t.Fatalf("after the operator deleted one: %v", err)
	}
	c.Close()
}
