package petrel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// Links this node dialled: a reload that changes the secret this node
// proves to a neighbour closes its connection to it, which its senders
// redial with the new secret; a neighbour removed from nodes is closed
// and not dialled again. Links whose secret did not change stay up.

// linkTo returns a's sender status of the queue toward dest.
func linkTo(a *petrel.Node, dest string) (petrel.LinkStatus, bool) {
	for _, l := range a.Links() {
		if l.Queue == dest {
			return l, true
		}
	}
	return petrel.LinkStatus{}, false
}

// dialler opens node "a" with cfg, which it completes, dialling b and c
// as cfg has them, and waits for a message to each acked.
func dialler(t *testing.T, cfg *petrel.Config) *petrel.Node {
	t.Helper()
	cfg.Name, cfg.DataDir, cfg.Logger, cfg.Link = "a", t.TempDir(), quiet, nodes.FastLinks
	a, err := petrel.Open(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for _, dest := range []string{"orders@b", "orders@c"} {
		sendOne(t, a, dest, "before")
		petreltest.Eventually(t, "the message to "+dest+" acked", func() bool { l, ok := linkTo(a, dest); return ok && l.Acked == 1 },
			func() string { return fmt.Sprintf("%+v", a.Links()) })
	}
	return a
}

func TestReconfigureRedialsChangedDialSecret(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    petrel.Config        // a's config; b is dialled with "old"
		bNew string               // the secret b holds a to after the change
		edit func(*petrel.Config) // the change of a's config
	}{
		{"the neighbour's own secret", petrel.Config{
			Nodes: []petrel.NodeConfig{{Name: "b", Secret: "old"}, {Name: "c", Secret: "c"}},
		}, "new", func(c *petrel.Config) {
			c.Nodes = slices.Clone(c.Nodes)
			c.Nodes[0].Secret = "new"
		}},
		{"its peers entry's secret", petrel.Config{
			Nodes: []petrel.NodeConfig{{Name: "b"}, {Name: "c"}},
			Peers: []petrel.PeerConfig{{Name: "b", Secret: "old"}, {Name: "c", Secret: "c"}},
		}, "new", func(c *petrel.Config) {
			c.Peers = slices.Clone(c.Peers)
			c.Peers[0].Secret = "new"
		}},
		{"its peers entry removed", petrel.Config{
			Secret: "shared",
			Nodes:  []petrel.NodeConfig{{Name: "b"}, {Name: "c", Secret: "c"}},
			Peers:  []petrel.PeerConfig{{Name: "b", Secret: "old"}, {Name: "x", Secret: "x"}},
		}, "shared", func(c *petrel.Config) {
			c.Peers = c.Peers[1:]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsA := func(secret string) func(*petrel.Config) {
				return func(c *petrel.Config) { c.Peers = []petrel.PeerConfig{{Name: "a", Secret: secret}} }
			}
			var bCfg petrel.Config
			b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
				holdsA("old")(c)
				bCfg = *c
			}))
			c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(holdsA("c")))
			cfg := tc.a
			cfg.Nodes = slices.Clone(cfg.Nodes)
			cfg.Nodes[0].Connector, cfg.Nodes[1].Connector = nodes.TCP(b), nodes.TCP(c)
			a := dialler(t, &cfg)

			tc.edit(&cfg)
			if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			// a's link to b, admitted on the old secret, is closed, and
			// a dials again with the new one, which b refuses for now.
			petreltest.Eventually(t, "a redialled b with the new secret", func() bool { return b.ReceiverStats().AuthFailed > 0 },
				func() string { return fmt.Sprintf("b: %+v; a: %+v", b.ReceiverStats(), a.Links()) })
			if l, _ := linkTo(a, "orders@c"); l.Reconnects != 0 || c.ReceiverStats().Connections != 1 {
				t.Fatalf("the link to c, whose secret did not change, was reset: %+v, c saw %d connections", l, c.ReceiverStats().Connections)
			}
			holdsA(tc.bNew)(&bCfg)
			if _, err := b.Reconfigure(context.Background(), bCfg); err != nil {
				t.Fatal(err)
			}
			sendOne(t, a, "orders@b", "after")
			petreltest.Eventually(t, "the message to b acked on the new secret", func() bool { l, _ := linkTo(a, "orders@b"); return l.Acked == 2 },
				func() string { return fmt.Sprintf("%+v", a.Links()) })
		})
	}
}

// TestReconfigureRemovedNeighbourNotRedialled: a neighbour removed from
// nodes has the connection this node dialled to it closed, not only its
// senders stopped, and is not dialled again.
func TestReconfigureRemovedNeighbourNotRedialled(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"))
	cfg := petrel.Config{Nodes: []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}, {Name: "c", Connector: nodes.TCP(c)}}}
	withAdmin(&cfg)
	a := dialler(t, &cfg)
	const toB, toC = `petrel_link_connections{next_hop="b"}`, `petrel_link_connections{next_hop="c"}`
	if m := scrape(t, a); m[toB] != 1 || m[toC] != 1 {
		t.Fatalf("connections before: b %v, c %v", m[toB], m[toC])
	}
	cfg.Nodes = cfg.Nodes[1:]
	if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the connection to b closed", func() bool { return scrape(t, a)[toB] == 0 })
	time.Sleep(500 * time.Millisecond) // more than FastLinks' longest backoff
	if n := b.ReceiverStats().Connections; n != 1 {
		t.Fatalf("b saw %d connections from a, want the first only", n)
	}
	if l, _ := linkTo(a, "orders@c"); l.Reconnects != 0 || l.State != "connected" || scrape(t, a)[toC] != 1 {
		t.Fatalf("the link to c was reset: %+v", l)
	}
}
