package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestAccessTopicActions checks the publish and subscribe actions: a
// publish pattern must match the topic name, a subscribe pattern must
// cover the pattern asked for, and send patterns reach no topic.
func TestAccessTopicActions(t *testing.T) {
	n := nodes.Open(t, withTopics("orders.#", "alerts.#"), nodes.With(func(c *petrel.Config) {
		c.Access = []petrel.AccessRule{
			{Identity: "app-1", Publish: []string{"orders.eu.*"}, Subscribe: []string{"orders.#"}, Send: []string{"*"}},
			{Identity: "app-2", Subscribe: []string{"orders.*.created", "alerts.disk"}},
			{Identity: "*", Publish: []string{"alerts.#"}},
		}
	}))
	tests := []struct {
		who    string
		action petrel.Action
		addr   string
		ok     bool
	}{
		{"app-1", petrel.ActionPublish, "orders.eu.created", true},
		{"app-1", petrel.ActionPublish, "orders.eu.created@self", true},
		{"app-1", petrel.ActionPublish, "orders.eu", false},
		{"app-1", petrel.ActionPublish, "orders.us.created", false},
		{"app-1", petrel.ActionPublish, "orders.eu.de.created", false},
		{"app-1", petrel.ActionPublish, "alerts", true}, // "#" is zero words too
		{"app-1", petrel.ActionPublish, "alerts.disk.full", true},
		{"stranger", petrel.ActionPublish, "alerts.cpu", true},
		{"stranger", petrel.ActionPublish, "orders.eu.created", false},
		{"app-1", petrel.ActionSubscribe, "orders.#", true},
		{"app-1", petrel.ActionSubscribe, "orders.eu.*", true},
		{"app-1", petrel.ActionSubscribe, "orders", true},
		{"app-1", petrel.ActionSubscribe, "#", false},
		{"app-1", petrel.ActionSubscribe, "alerts.#", false},
		{"app-2", petrel.ActionSubscribe, "orders.*.created", true},
		{"app-2", petrel.ActionSubscribe, "orders.eu.created", true},
		{"app-2", petrel.ActionSubscribe, "orders.#", false},         // wider than granted
		{"app-2", petrel.ActionSubscribe, "orders.#.created", false}, // "#" may be two words
		{"app-2", petrel.ActionSubscribe, "alerts.disk", true},
		{"app-2", petrel.ActionSubscribe, "alerts.*", false},
		{"app-2", petrel.ActionSubscribe, "orders..x", false}, // not a pattern
		{"stranger", petrel.ActionSubscribe, "alerts.#", false},
		// Send and consume patterns are for addresses, not topics.
		{"app-1", petrel.ActionSend, "orders.us.created", true},
		{"app-2", petrel.ActionConsume, "orders.eu.created", false},
	}
	for _, tt := range tests {
		err := n.Authorize(tt.who, tt.action, tt.addr)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, petrel.ErrDenied) {
			t.Errorf("Authorize(%q, %s, %q) = %v, want allowed %v", tt.who, tt.action, tt.addr, err, tt.ok)
		}
	}
	err := n.Authorize("app-2", petrel.ActionSubscribe, "orders.#")
	for _, want := range []string{`peer "app-2" may not subscribe to "orders.#"`, "subscribe pattern that covers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("denial %v does not say %q", err, want)
		}
	}
	st := n.AccessStats()
	if st.Denied[petrel.ActionPublish] != 4 || st.Denied[petrel.ActionSubscribe] != 8 {
		t.Errorf("denied %v, want publish 4 and subscribe 8", st.Denied)
	}
}

func TestAccessTopicPatternsAreValidated(t *testing.T) {
	tests := []struct {
		rule petrel.AccessRule
		want string
	}{
		{petrel.AccessRule{Identity: "a", Publish: []string{"orders.#", "orders.#x"}}, `access[0].publish[1]: topic pattern "orders.#x"`},
		{petrel.AccessRule{Identity: "a", Subscribe: []string{""}}, "access[0].subscribe[0]: topic pattern"},
		{petrel.AccessRule{Identity: "a", Subscribe: []string{"a..b"}}, "empty word"},
		{petrel.AccessRule{Identity: "a", Publish: []string{"orders*"}}, "access[0].publish[0]"},
	}
	for _, tt := range tests {
		err := petrel.Config{Name: "n", Access: []petrel.AccessRule{tt.rule}}.Validate()
		if !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.rule, err, tt.want)
		}
	}
	ok := petrel.Config{Name: "n", Access: []petrel.AccessRule{{Identity: "*", Publish: []string{"#"}, Subscribe: []string{"*.eu.#"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

// TestHostileTopicPublishDenied has a remote client, which may send to
// every address, publish to topics: only the one its publish pattern
// matches is stored and fanned out; the others are refused with the
// reason, never reach a subscription, and are counted.
func TestHostileTopicPublishDenied(t *testing.T) {
	n := openNode(t, "plant-7", "127.0.0.1:0", func(c *petrel.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#"}, {Pattern: "alerts.#"}}
		c.Access = []petrel.AccessRule{{Identity: "app-1", Send: []string{"*"}, Publish: []string{"orders.eu.*"}}}
	})
	orders := subscribe(t, n, "orders.#", petrel.SubscribeOptions{})
	alerts := subscribe(t, n, "alerts.#", petrel.SubscribeOptions{})
	ctx := context.Background()
	p := dial(t, n, petrel.DialOptions{Name: "app-1"}).Producer()
	for _, topic := range []string{"alerts.disk", "orders.us.created", "orders.eu.created.late"} {
		m := p.CreateDataMessage(topic)
		m.Body = []byte("denied " + topic)
		err := p.Send(ctx, m)
		if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `may not publish to topic "`+topic+`"`) {
			t.Fatalf("publish to %s: %v, want ErrDenied saying it may not publish", topic, err)
		}
	}
	m := p.CreateDataMessage("orders.eu.created")
	m.Body = []byte("allowed")
	if err := p.Send(ctx, m); err != nil {
		t.Fatalf("publish to orders.eu.created: %v", err)
	}
	if err := p.Send(ctx, p.CreateDataMessage("plain")); err != nil {
		t.Fatalf("send to the address plain: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	d, err := orders.Receive(rctx)
	if err != nil || string(d.Body) != "allowed" {
		t.Fatalf("orders.# got %v, %v; want the allowed publish", d, err)
	}
	d.Ack()
	if got := takeAll(t, orders); len(got) != 0 {
		t.Errorf("orders.# also got %v", got)
	}
	if got := takeAll(t, alerts); len(got) != 0 {
		t.Errorf("alerts.# got %v, which the rules denied", got)
	}
	if st := n.AccessStats(); st.Denied[petrel.ActionPublish] != 3 || st.Denied[petrel.ActionSend] != 0 {
		t.Errorf("denied %v, want 3 publishes", st.Denied)
	}
	if got := scrape(t, n)[`petrel_access_denied_total{action="publish"}`]; got != 3 {
		t.Errorf(`petrel_access_denied_total{action="publish"} = %v, want 3`, got)
	}
	if st := n.ReceiverStats(); st.ClientDenied != 3 {
		t.Errorf("client denied %d, want 3", st.ClientDenied)
	}
}

// TestAccessTopicPublishFromLink has a neighbour, which may send to every
// address, publish to topics of b: the one its publish pattern matches is
// fanned out; the other is refused before b stores it, and a dead-letters
// it with the reason.
func TestAccessTopicPublishFromLink(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), withTopics("orders.#", "alerts.#"), nodes.With(func(c *petrel.Config) {
		c.Access = []petrel.AccessRule{{Identity: "a", Send: []string{"*"}, Publish: []string{"orders.#"}}}
	}))
	alerts := subscribe(t, b, "alerts.#", petrel.SubscribeOptions{})
	orders := subscribe(t, b, "orders.#", petrel.SubscribeOptions{})
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	sendOne(t, a, "alerts.disk@b", "denied")
	sendOne(t, a, "orders.eu@b", "allowed")

	d := deadLetter(t, a, "alerts.disk.dlq")
	if string(d.Body) != "denied" || !strings.Contains(d.Reason, `peer "a" may not publish to topic "alerts.disk@b"`) {
		t.Fatalf("dead letter %q, reason %q", d.Body, d.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := orders.Receive(ctx)
	if err != nil || string(got.Body) != "allowed" {
		t.Fatalf("orders.# got %v, %v; want the allowed publish", got, err)
	}
	got.Ack()
	if bodies := takeAll(t, alerts); len(bodies) != 0 {
		t.Errorf("alerts.# got %v, which the rules denied", bodies)
	}
	if st := b.AccessStats(); st.Denied[petrel.ActionPublish] != 1 || st.Denied[petrel.ActionSend] != 0 {
		t.Errorf("denied %v, want 1 publish", st.Denied)
	}
}

// TestAccessInterestInCatchAllSpace: with access rules and a topic space
// that matches "_petrel.topics" word by word ("#", "*.#"), a neighbour's
// interest is still judged under the send rule of "_petrel.topics", and
// its pattern under the subscribe rules, as in any space: what the rules
// allow is learned and drawn; what they do not is counted as refused
// interest, not as a publish. The interest was refused as a publish to the
// topic "_petrel.topics" before, so nothing was learned. No space or
// subscription may start with the word "_petrel".
func TestAccessInterestInCatchAllSpace(t *testing.T) {
	for _, space := range []string{"#", "*.#"} {
		t.Run(space, func(t *testing.T) {
			m := newMesh(t, "a", "b")
			open := func(name, other string, mod func(*petrel.Config)) *petrel.Node {
				return nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), withTopics(space), nodes.With(func(c *petrel.Config) {
					c.Nodes = []petrel.NodeConfig{{Name: other, Connector: "tcp://" + m[other]}}
					mod(c)
				}))
			}
			a := open("a", "b", func(c *petrel.Config) {
				c.Access = []petrel.AccessRule{{Identity: "b", Send: []string{"_petrel.topics"}, Subscribe: []string{"orders.eu.#"}}}
			})
			b := open("b", "a", func(*petrel.Config) {})
			ok := subscribe(t, b, "orders.eu.*", petrel.SubscribeOptions{Name: "ok", Durable: true})
			subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "wide", Durable: true})
			waitInterest(t, a, "b/b/orders.eu.*")
			drainSub(t, ok, publishN(t, a, "orders.eu.x", 3), a)
			petreltest.Eventually(t, "a refused b's orders.# as interest", func() bool {
				return a.AccessStats().Denied[petrel.ActionSubscribe] == 1
			}, func() string { return fmt.Sprintf("%+v", a.AccessStats()) })
			if st := a.AccessStats(); st.Denied[petrel.ActionPublish] != 0 || st.Denied[petrel.ActionSend] != 0 {
				t.Errorf("a denied %v, want subscribe 1 alone", st.Denied)
			}
			for _, in := range a.TopicInterest() {
				if in.Pattern == "orders.#" {
					t.Errorf("a learned %+v past b's subscribe rule", in)
				}
			}
			for _, p := range []string{"_petrel.topics", "_petrel.#"} {
				if _, err := b.Subscribe(context.Background(), p, petrel.SubscribeOptions{}); !errors.Is(err, address.ErrTopicPattern) || !strings.Contains(err.Error(), "internal") {
					t.Errorf("subscribe %q: %v, want ErrTopicPattern saying the word is internal", p, err)
				}
			}
		})
	}
	err := petrel.Config{Name: "n", Topics: []petrel.TopicConfig{{Pattern: "_petrel.#"}}}.Validate()
	if !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), "internal") {
		t.Errorf("a space _petrel.#: %v, want a configuration error", err)
	}
}
