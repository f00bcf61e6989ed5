package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// identityHub opens node "hub" with two client identities, app-a and
// app-b, and a node identity, plant, with the bounds per identity that
// mod sets, and its admin listener.
func identityHub(t *testing.T, mod func(*petrel.LinkConfig)) *petrel.Node {
	t.Helper()
	return openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = []petrel.PeerConfig{
			{Name: "app-a", Secret: "a", Kind: petrel.PeerKindClient},
			{Name: "app-b", Secret: "b", Kind: petrel.PeerKindClient},
			{Name: "plant", Secret: "p"},
		}
		mod(&c.Link)
		withAdmin(c)
	})
}

// TestSessionsPerIdentityBound: one client identity holds at most
// link.max_sessions_per_identity sessions on the node, its producers' and
// its consumers' on all its Dials together. The consumer past the bound,
// and a Dial whose producers' session would be, are refused with the
// reason; the identity's sessions already open keep working, one it
// closes gives its place back, another identity is not touched, and
// /metrics counts the refusals as reason="identity". Before, nothing
// bounded them but 1,024 per connection and link.max_connections.
func TestSessionsPerIdentityBound(t *testing.T) {
	const bound = 6
	n := identityHub(t, func(l *petrel.LinkConfig) { l.MaxSessionsPerIdentity = bound })
	// Two Dials of app-a: a session each for their producers, and two
	// consumers each, six in all.
	c1 := nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "a"})
	c2 := nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "a"})
	var cons []*petrel.Consumer
	for i, c := range []*petrel.Client{c1, c2, c1, c2} {
		cons = append(cons, consumer(t, c, fmt.Sprint("inbox-a", i)))
	}
	_, err := c2.Consumer("inbox-a")
	const why = "link.max_sessions_per_identity"
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), `identity "app-a" holds 6 sessions`) || !strings.Contains(err.Error(), why) {
		t.Fatalf("consumer past %d sessions of app-a: %v; want ErrRefused naming %s", bound, err, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := petrel.Dial(ctx, nodes.TCP(n), petrel.DialOptions{Name: "app-a", Secret: "a", Logger: quiet}); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("a third Dial of app-a: %v; want its producers' session refused naming %s", err, why)
	}

	// Another identity is not touched.
	b := nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "b"})
	bc := consumer(t, b, "inbox-b")
	sendVia(t, b, "inbox-b", "to b")
	ackBody(t, bc, "to b")

	// app-a's sessions open before the bound still carry messages.
	sendVia(t, c1, "inbox-a3", "still here")
	ackBody(t, cons[3], "still here")
	// A consumer closed gives its place back.
	if err := cons[0].Close(); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "app-a opens a consumer once one closed", func() bool {
		c, err := c2.Consumer("inbox-a")
		if err == nil {
			cons[0] = c
		}
		return err == nil
	})

	m := scrape(t, n)
	if got := m[`petrel_receiver_sessions_refused_total{reason="identity"}`]; got < 2 {
		t.Errorf(`petrel_receiver_sessions_refused_total{reason="identity"} = %v, want at least 2`, got)
	}
	if got, ok := m[`petrel_receiver_sessions_refused_total{reason="policy"}`]; !ok || got != 0 {
		t.Errorf(`petrel_receiver_sessions_refused_total{reason="policy"} = %v (present %v), want 0`, got, ok)
	}
	// app-a's six and app-b's two.
	if got := m[`petrel_receiver_client_sessions`]; got != bound+2 {
		t.Errorf("petrel_receiver_client_sessions = %v, want %d", got, bound+2)
	}
	if rs := n.ReceiverStats(); rs.SessionsOverIdentity < 2 || rs.SessionsRefused != rs.SessionsOverIdentity {
		t.Errorf("ReceiverStats: %d over the identity's bound of %d refused, want at least 2, all of them", rs.SessionsOverIdentity, rs.SessionsRefused)
	}
}

// TestSessionsPerIdentityBoundSparesNodes: the bound is on client
// identities only. A node's link carries one session per send queue
// toward this node, which its own producers make; a node identity opens
// past the clients' bound, and its messages are stored.
func TestSessionsPerIdentityBoundSparesNodes(t *testing.T) {
	const bound = 2
	n := identityHub(t, func(l *petrel.LinkConfig) {
		l.MaxSessionsPerIdentity = bound
		l.MaxConnectionsPerIdentity = 1
	})
	plant := nodeID("plant")
	// Two connections, past the clients' bound of one, with more
	// sessions each than the clients' bound.
	for c := range 2 {
		conn := mustRawPeer(t, n, "plant", "p", plant)
		for i := range bound + 1 {
			sess := openLink(t, conn)
			id := uint64(c*10 + i + 1)
			if r := sendAll(t, sess, msg(plant, id, "from a node")); r[0] != "" {
				t.Fatalf("link session %d of connection %d: refused %s", i+1, c+1, r[0])
			}
		}
	}
	if d := depth(n, "orders"); d != 2*(bound+1) {
		t.Fatalf("orders holds %d messages, want %d", d, 2*(bound+1))
	}
	if rs := n.ReceiverStats(); rs.SessionsOverIdentity != 0 || rs.ConnectionsOverIdentity != 0 {
		t.Fatalf("ReceiverStats: %d sessions and %d connections of a node refused past the clients' bounds, want none",
			rs.SessionsOverIdentity, rs.ConnectionsOverIdentity)
	}
}

// TestConnectionsPerIdentityBound: one client identity holds at most
// link.max_connections_per_identity connections to the node; the Dial
// past it fails at its handshake with the reason, another identity still
// connects, /metrics counts the refusal, and a client closed gives its
// place back.
func TestConnectionsPerIdentityBound(t *testing.T) {
	n := identityHub(t, func(l *petrel.LinkConfig) { l.MaxConnectionsPerIdentity = 2 })
	c1 := nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "a"})
	nodes.Dial(t, n, petrel.DialOptions{Name: "app-a", Secret: "a"})
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := petrel.Dial(ctx, nodes.TCP(n), petrel.DialOptions{Name: "app-a", Secret: "a", Logger: quiet})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return err
	}
	const why = "link.max_connections_per_identity"
	if err := dial(); err == nil || !strings.Contains(err.Error(), `identity "app-a" holds 2 connections`) || !strings.Contains(err.Error(), why) {
		t.Fatalf("a third Dial of app-a: %v; want a refusal naming %s", err, why)
	}
	nodes.Dial(t, n, petrel.DialOptions{Name: "app-b", Secret: "b"})
	if got := scrape(t, n)[`petrel_connections_rejected_total{reason="identity"}`]; got != 1 {
		t.Errorf(`petrel_connections_rejected_total{reason="identity"} = %v, want 1`, got)
	}
	if rs := n.ReceiverStats(); rs.ConnectionsOverIdentity != 1 {
		t.Errorf("ReceiverStats.ConnectionsOverIdentity = %d, want 1", rs.ConnectionsOverIdentity)
	}
	c1.Close()
	petreltest.Eventually(t, "app-a dials once a client closed", func() bool { return dial() == nil })
}

// sendVia sends body to addr through c's producer.
func sendVia(t *testing.T, c *petrel.Client, addr, body string) {
	t.Helper()
	p := c.Producer()
	m := p.CreateDataMessage(addr)
	m.Body = []byte(body)
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	if err := p.Send(ctx, m); err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
}

// ackBody receives one delivery from cn, checks its body and acks it.
func ackBody(t *testing.T, cn *petrel.Consumer, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	d, err := cn.Receive(ctx)
	if err != nil {
		t.Fatalf("receive %q: %v", body, err)
	}
	if string(d.Body) != body {
		t.Fatalf("received %q, want %q", d.Body, body)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}
