package petrel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestDialWithNodeIdentityRefused: petrel.Dial given the name and secret
// of a node's peers entry (kind node) is refused, with the reason, and
// binds nothing: the node identity is bound to an id only by a
// connection that opens a link, so the real node, which dials next,
// connects and delivers. A client's random id once took the node's
// binding for good, and the real node was refused from then on.
func TestDialWithNodeIdentityRefused(t *testing.T) {
	const secret = "s3cret-plant-7"
	hubDir := t.TempDir()
	hub := nodes.Open(t, nodes.Name("hub"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.DataDir = hubDir
		c.Peers = []petrel.PeerConfig{{Name: "plant-7", Secret: secret}}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := petrel.Dial(ctx, nodes.TCP(hub), petrel.DialOptions{Name: "plant-7", Secret: secret, Logger: quiet})
	if err == nil {
		c.Close()
		t.Fatal("Dial with the node identity plant-7 succeeded")
	}
	if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), `identity "plant-7" is a node; clients connect with an identity of kind client`) {
		t.Fatalf("Dial with a node identity: %v, want ErrRefused saying plant-7 is a node", err)
	}
	if raw, err := os.ReadFile(filepath.Join(hubDir, "peer-ids.json")); err == nil && strings.Contains(string(raw), "plant-7") {
		t.Fatalf("the refused Dial bound plant-7: %s", raw)
	}

	plant := nodes.Open(t, nodes.Name("plant-7"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "hub", Connector: nodes.TCP(hub), Secret: secret}}
	}))
	p := plant.Producer()
	m := p.CreateDataMessage("orders@hub")
	m.Body = []byte("from the real plant-7")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	drainBodies(t, hub, "orders", []string{"from the real plant-7"}, plant)
	raw, err := os.ReadFile(filepath.Join(hubDir, "peer-ids.json"))
	if err != nil || !strings.Contains(string(raw), plant.ID().String()) {
		t.Fatalf("plant-7 not bound to the real node's id %s: %s %v", plant.ID(), raw, err)
	}
}
