package petrel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// loopNodes opens the nodes of m, each relaying orders and routing node
// "c", which none of them is, via the next in routes (routes[name] is
// name's next hop toward c), each with that next hop as its neighbour.
func loopNodes(t *testing.T, m mesh, routes map[string]string) map[string]*petrel.Node {
	t.Helper()
	out := map[string]*petrel.Node{}
	for name, via := range routes {
		out[name] = nodes.Open(t, nodes.Name(name), nodes.Listen(m[name]), nodes.With(func(c *petrel.Config) {
			c.Admin.Listen = "127.0.0.1:0"
			c.Nodes = []petrel.NodeConfig{{Name: via, Connector: "tcp://" + m[via]}}
			c.Routes = []petrel.RouteConfig{{Node: "c", Via: via}}
			c.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleRelay}}
		}))
	}
	return out
}

// sendLooping sends a message to orders@c at n, and returns it as its
// sender's dead-letter queue holds it, with the reason.
func sendLooping(t *testing.T, n *petrel.Node, body string) *petrel.Delivery {
	t.Helper()
	p := n.Producer()
	m := p.CreateDataMessage("orders@c")
	m.Body = []byte(body)
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d := deadLetter(t, n, "orders.dlq")
	if string(d.Body) != body {
		t.Fatalf("dead letter %q, want %q", d.Body, body)
	}
	return d
}

// TestRoutingLoopBetweenTwoNodesIsRefused: a routes c via b, and b via a.
// Before, each handed the message on, and a dropped it as a duplicate
// when it came round: acked everywhere, delivered nowhere, and not a line
// in either log. Now b refuses it for good, since its route leads back to
// the peer that handed it over, and a dead-letters it with the reason.
func TestRoutingLoopBetweenTwoNodesIsRefused(t *testing.T) {
	ns := loopNodes(t, newMesh(t, "a", "b"), map[string]string{"a": "b", "b": "a"})
	a, b := ns["a"], ns["b"]
	d := sendLooping(t, a, "round and round")
	if !strings.Contains(d.Reason, "routing loop") || !strings.Contains(d.Reason, "leads back to a") {
		t.Fatalf("dead-letter reason %q, want the routing loop through a", d.Reason)
	}
	if got := b.ReceiverStats().RoutingLoops; got != 1 {
		t.Fatalf("b counted %d routing loops, want 1", got)
	}
	if got := scrape(t, b)["petrel_routing_loops_total"]; got != 1 {
		t.Fatalf("b's petrel_routing_loops_total is %v, want 1", got)
	}
	if st, _ := a.QueueStat("orders@c"); st.Depth != 0 {
		t.Fatalf("a's send queue still holds %d", st.Depth)
	}
}

// TestRoutingLoopBackToTheOriginIsRefused: a routes c via b, b via d and d
// via a. No node's route leads back to the peer that handed the message
// over, but the message comes back to a, its origin, which refuses it:
// d dead-letters it with the reason.
func TestRoutingLoopBackToTheOriginIsRefused(t *testing.T) {
	ns := loopNodes(t, newMesh(t, "a", "b", "d"), map[string]string{"a": "b", "b": "d", "d": "a"})
	a, d := ns["a"], ns["d"]
	p := a.Producer()
	m := p.CreateDataMessage("orders@c")
	m.Body = []byte("three hops round")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	dl := deadLetter(t, d, "orders.dlq")
	if string(dl.Body) != "three hops round" || dl.Origin != a.ID() {
		t.Fatalf("dead letter %q of origin %s, want a's message", dl.Body, dl.Origin)
	}
	if !strings.Contains(dl.Reason, "routing loop") || !strings.Contains(dl.Reason, "node a's own message") {
		t.Fatalf("dead-letter reason %q, want a's own message come back", dl.Reason)
	}
	if got := a.ReceiverStats().RoutingLoops; got != 1 {
		t.Fatalf("a counted %d routing loops, want 1", got)
	}
}
