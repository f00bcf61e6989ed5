package petrel_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/session"
)

// Revocations: a live change of the access rules or of peers takes away
// what a connection or a subscription already holds, not only what opens
// next. The revoked consumer is told why, nothing sent later reaches it,
// and what it held unsettled goes back to the queue.

// revokeHub opens "hub" with client app-1, which may consume "orders" and
// subscribe to "events.#", and returns it with its configuration.
func revokeHub(t *testing.T) (*petrel.Node, petrel.Config) {
	t.Helper()
	var cfg petrel.Config
	n := nodes.Open(t, nodes.Name("hub"), nodes.Listen("127.0.0.1:0"), withTopics("events.#"), nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "orders"}}
		c.Peers = []petrel.PeerConfig{
			{Name: "ops", Secret: "ops-secret"},
			{Name: "app-1", Secret: "app-secret", Kind: petrel.PeerKindClient},
		}
		c.Access = []petrel.AccessRule{
			{Identity: "ops", Send: []string{"orders"}},
			{Identity: "app-1", Consume: []string{"orders"}, Subscribe: []string{"events.#"}},
		}
		cfg = *c
	}))
	return n, cfg
}

// receiveErr waits for c.Receive to fail, and returns its error.
func receiveErr(t *testing.T, c *petrel.Consumer) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		d, err := c.Receive(ctx)
		if err != nil {
			return err
		}
		t.Errorf("the revoked consumer received %q", d.Body)
		d.Nack("revoked")
	}
}

func TestReconfigureRevokesClientConsumer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revoke func(*petrel.Config)
		reason string
	}{
		{"consume rule removed", func(c *petrel.Config) {
			c.Access = c.Access[:1]
		}, `peer "app-1" may not consume from "orders"`},
		{"identity removed from peers", func(c *petrel.Config) {
			c.Peers = c.Peers[:1]
		}, `identity "app-1" was removed from peers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, cfg := revokeHub(t)
			c := nodes.Dial(t, n, petrel.DialOptions{Name: "app-1", Secret: "app-secret"})
			cons := consumer(t, c, "orders")
			sendOne(t, n, "orders", "before-1")
			sendOne(t, n, "orders", "before-2")
			if d := receive(t, cons); string(d.Body) != "before-1" || d.Ack() != nil {
				t.Fatalf("first delivery %q", d.Body)
			}
			held := receive(t, cons) // leased to app-1 when its right goes
			petreltest.Eventually(t, "the ack taken and one message in flight", func() bool {
				st, _ := n.QueueStat("orders")
				return st.Depth == 1 && st.InFlight == 1
			})

			tc.revoke(&cfg)
			if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			sendOne(t, n, "orders", "after")
			err := receiveErr(t, cons)
			if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("the revoked consumer's Receive: %v, want ErrDenied naming %q", err, tc.reason)
			}
			if err := held.Ack(); err == nil {
				t.Fatal("the revoked consumer acked a message it held after its right was gone")
			}
			// What it held is back in the queue, with what came after.
			petreltest.Eventually(t, "the held message given back", func() bool {
				st, _ := n.QueueStat("orders")
				return st.Depth == 2 && st.InFlight == 0
			})
			local := consumer(t, n, "orders")
			var got []string
			for range 2 {
				d := receive(t, local)
				got = append(got, string(d.Body))
				d.Ack()
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"after", "before-2"}) {
				t.Fatalf("the node's consumer got %q, want before-2 and after", got)
			}
		})
	}
}

func TestReconfigureRevokesClientSubscription(t *testing.T) {
	n, cfg := revokeHub(t)
	c := nodes.Dial(t, n, petrel.DialOptions{Name: "app-1", Secret: "app-secret"})
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "events.#", petrel.SubscribeOptions{Name: "mine", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sendOne(t, n, "events.eu", "before")
	expectBodies(t, sub, "before the revocation", "before")
	// A remote ack is flushed in the background; one still on its way
	// when the right goes is refused, and "before" is rightly kept too.
	petreltest.Eventually(t, "the ack of the first message taken", func() bool {
		st, _ := n.QueueStat("sub:mine")
		return st.Depth == 0 && st.InFlight == 0
	})

	cfg.Access = []petrel.AccessRule{cfg.Access[0], {Identity: "app-1", Consume: []string{"orders"}}}
	if _, err := n.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	sendOne(t, n, "events.eu", "after")
	err = receiveErr(t, sub)
	if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `peer "app-1" may not subscribe`) {
		t.Fatalf("the revoked subscription's Receive: %v, want ErrDenied with the reason", err)
	}
	// The durable subscription keeps what came after, for whoever may
	// consume it.
	petreltest.Eventually(t, "the later message kept in sub:mine", func() bool {
		st, _ := n.QueueStat("sub:mine")
		return st.Depth == 1 && st.InFlight == 0
	})
	if err := n.Unsubscribe(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
}

// TestReconfigureCutsRevokedIdentities: the connection of an identity
// removed from peers, or whose entry no longer lets it relay, is closed;
// one that reconnects is judged by its new entry.
func TestReconfigureCutsRevokedIdentities(t *testing.T) {
	n, cfg := hostileHub(t,
		petrel.PeerConfig{Name: "plant-7", Secret: "p"},
		petrel.PeerConfig{Name: "relay-1", Secret: "r", Relay: true},
		petrel.PeerConfig{Name: "app-1", Secret: "a", Kind: petrel.PeerKindClient})
	plant := mustRawPeer(t, n, "plant-7", "p", nodeID("plant-7"))
	relay := mustRawPeer(t, n, "relay-1", "r", nodeID("relay-1"))
	app := mustRawPeer(t, n, "app-1", "a", nodeID("app-1"))
	if got := sendAll(t, openLink(t, relay), msg(nodeID("far-away"), 1, "relayed")); got[0] != "" {
		t.Fatalf("relay refused: %s", got[0])
	}
	sub, err := app.OpenSubscribe(context.Background(), "orders", 10)
	if err != nil {
		t.Fatal(err)
	}

	cfg.Peers = []petrel.PeerConfig{{Name: "relay-1", Secret: "r"}}
	if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*session.Conn{"plant-7": plant, "relay-1": relay, "app-1": app} {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("the connection of %s is still up after its identity was revoked", name)
		}
	}
	if err := sub.Err(); !errors.Is(err, session.ErrDenied) || !strings.Contains(err.Error(), `"app-1" was removed from peers`) {
		t.Fatalf("app-1's subscription ended with %v, want a denial naming the removal", err)
	}
	// Reconnected, relay-1 is a relay no longer.
	relay = mustRawPeer(t, n, "relay-1", "r", nodeID("relay-1"))
	got := sendAll(t, openLink(t, relay), msg(nodeID("far-away"), 2, "relayed"), msg(nodeID("relay-1"), 1, "own"))
	if !strings.Contains(got[0], "is not a permitted relay here") || got[1] != "" {
		t.Fatalf("after the relay flag was removed: %q", got)
	}
	if d := depth(n, "orders"); d != 2 {
		t.Fatalf("orders holds %d, want the relayed message before and relay-1's own", d)
	}
}
