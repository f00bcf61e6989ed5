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
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// deadLetter waits for the next message in addr on n and returns it.
func deadLetter(t *testing.T, n *petrel.Node, addr string) *petrel.Delivery {
	t.Helper()
	c, err := n.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("nothing in %s: %v; links %+v", addr, err, n.Links())
	}
	d.Ack()
	return d
}

func TestAccessDeniedMessageIsDeadLettered(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Access = []petrel.AccessRule{
			{Identity: "a", Send: []string{"orders.*"}},
			{Identity: "*", Send: []string{"public"}},
		}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	sendOne(t, a, "orders@b", "denied")
	sendOne(t, a, "orders.eu@b", "allowed")
	sendOne(t, a, "public@b", "anyone")

	d := deadLetter(t, a, "orders.dlq")
	if string(d.Body) != "denied" {
		t.Fatalf("dead letter %q", d.Body)
	}
	for _, want := range []string{"refused", `node b: peer "a" may not send to "orders@b"`, "access denied"} {
		if !strings.Contains(d.Reason, want) {
			t.Errorf("reason %q does not say %q", d.Reason, want)
		}
	}
	drainBodies(t, b, "orders.eu", []string{"allowed"}, a)
	drainBodies(t, b, "public", []string{"anyone"}, a)
	if _, ok := b.QueueStat("orders"); ok {
		t.Error("a denied message made its queue")
	}
	st := b.Status().Access
	if st.Rules != 2 || st.Denied[petrel.ActionSend] != 1 || st.Denied[petrel.ActionRelay] != 0 {
		t.Errorf("access stats %+v", st)
	}
	if got := scrape(t, b)[`petrel_access_denied_total{action="send"}`]; got != 1 {
		t.Errorf("petrel_access_denied_total{action=send} = %v, want 1", got)
	}
}

// TestAccessRelayDeniedThenAllowedLive denies a relay, then adds the rule
// that allows it by Reconfigure: the next message passes, with no restart
// and without dropping the link.
func TestAccessRelayDeniedThenAllowedLive(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	var cfgC petrel.Config
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleRelay}}
		// a may send here, but not relay.
		cfg.Access = []petrel.AccessRule{{Identity: "a", Send: []string{"*"}}}
		cfgC = *cfg
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
	}))
	sendOne(t, a, "orders@b", "first")
	d := deadLetter(t, a, "orders.dlq")
	if string(d.Body) != "first" || !strings.Contains(d.Reason, `peer "a" may not relay "orders@b"`) {
		t.Fatalf("dead letter %q, reason %q", d.Body, d.Reason)
	}
	if st := c.AccessStats(); st.Denied[petrel.ActionRelay] != 1 {
		t.Fatalf("relay denial not counted: %+v", st)
	}
	reconnects := a.Links()[0].Reconnects

	cfgC.Access = append(cfgC.Access, petrel.AccessRule{Identity: "a", Relay: []string{"orders"}})
	r, err := c.Reconfigure(context.Background(), cfgC)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.Applied) != "[access]" || len(r.Restart) != 0 {
		t.Fatalf("Reconfigure = %+v", r)
	}
	sendOne(t, a, "orders@b", "second")
	got, _ := drainBodies(t, b, "orders", []string{"second"}, a, c)
	if string(got[0].Body) != "second" {
		t.Fatalf("b got %q", got[0].Body)
	}
	if l := a.Links()[0]; l.Reconnects != reconnects {
		t.Errorf("the link reconnected for a rule change: %+v", l)
	}
}

func TestAuthorize(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Access = []petrel.AccessRule{
			{Identity: "plant-9", Send: []string{"orders", "orders.*"}, Consume: []string{"replies"}},
			{Identity: "hub-1", Relay: []string{"*"}},
			{Identity: "*", Send: []string{"public.*"}},
		}
	}))
	tests := []struct {
		who    string
		action petrel.Action
		addr   string
		ok     bool
	}{
		{"plant-9", petrel.ActionSend, "orders", true},
		{"plant-9", petrel.ActionSend, "orders@plant-7", true},
		{"plant-9", petrel.ActionSend, "orders.eu", true},
		{"plant-9", petrel.ActionSend, "ordersx", false},
		{"plant-9", petrel.ActionConsume, "orders", false},
		{"plant-9", petrel.ActionConsume, "replies", true},
		{"plant-9", petrel.ActionRelay, "orders@x", false},
		{"hub-1", petrel.ActionRelay, "anything@x", true},
		{"hub-1", petrel.ActionSend, "orders", false},
		{"hub-1", petrel.ActionSend, "public.news", true},
		{"stranger", petrel.ActionSend, "public.news", true},
		{"stranger", petrel.ActionSend, "public", false},
		{"", petrel.ActionSend, "orders", false},
		{"plant-9", petrel.Action("delete"), "orders", false},
	}
	for _, tt := range tests {
		err := n.Authorize(tt.who, tt.action, tt.addr)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, petrel.ErrDenied) {
			t.Errorf("Authorize(%q, %s, %q) = %v, want allowed %v", tt.who, tt.action, tt.addr, err, tt.ok)
		}
	}
	// No rules: everything is allowed, and nothing is counted.
	free := nodes.Open(t)
	if err := free.Authorize("anyone", petrel.ActionRelay, "x@y"); err != nil {
		t.Errorf("no rules: %v", err)
	}
	if st := free.AccessStats(); st.Rules != 0 || st.Denied[petrel.ActionSend] != 0 {
		t.Errorf("no rules: %+v", st)
	}
}

func TestAccessRulesAreValidated(t *testing.T) {
	tests := []struct {
		rule petrel.AccessRule
		want string
	}{
		{petrel.AccessRule{Send: []string{"x"}}, "access[0].identity: a rule needs an identity"},
		{petrel.AccessRule{Identity: "bad name", Send: []string{"x"}}, "access[0].identity: name"},
		{petrel.AccessRule{Identity: "a"}, "access[0]: the rule grants nothing"},
		{petrel.AccessRule{Identity: "a", Send: []string{"x", "*.eu"}}, `access[0].send[1]: pattern "*.eu"`},
		{petrel.AccessRule{Identity: "a", Relay: []string{"a b*"}}, `access[0].relay[0]: pattern "a b*" is not`},
		{petrel.AccessRule{Identity: "a", Consume: []string{""}}, `access[0].consume[0]`},
	}
	for _, tt := range tests {
		err := petrel.Config{Name: "n", Access: []petrel.AccessRule{tt.rule}}.Validate()
		if !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.rule, err, tt.want)
		}
	}
	ok := petrel.Config{Name: "n", Access: []petrel.AccessRule{{Identity: "*", Send: []string{"*", "a.*", "b"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}
