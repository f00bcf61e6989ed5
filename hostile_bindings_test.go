package petrel_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// The hostile-peer suite for client ids: a client makes a new id at every
// Dial, and each id it proves stays bound to it for a dedupe window after
// its last handshake, so that no other identity can claim it and pre-store
// its future (origin, id) pairs.

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var bindingPeers = []petrel.PeerConfig{
	{Name: "app-y", Secret: "y", Kind: petrel.PeerKindClient},
	{Name: "app-x", Secret: "x", Kind: petrel.PeerKindClient},
	{Name: "mallory", Secret: "m"},
}

// publishAs dials n as the client identity name with id, publishes one
// message to orders, and closes.
func publishAs(t *testing.T, n *petrel.Node, name, secret string, id message.NodeID, body string) {
	t.Helper()
	c := nodes.Dial(t, n, petrel.DialOptions{Name: name, Secret: secret, ID: id})
	p := c.Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte(body)
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatalf("publish as %s: %v", name, err)
	}
	c.Close()
}

// claimRefused asserts that name cannot prove id, which is bound to owner.
func claimRefused(t *testing.T, n *petrel.Node, name, secret string, id message.NodeID, owner string) {
	t.Helper()
	c, err := rawPeer(t, n, name, secret, id)
	if c != nil || !errors.Is(err, session.ErrAuth) || !strings.Contains(err.Error(), `which is bound to identity "`+owner+`"`) {
		t.Fatalf("%s proved %s's id: %v, want ErrAuth naming %q", name, owner, err, owner)
	}
}

func TestHostileClaimsClientID(t *testing.T) {
	clk := newTestClock()
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = bindingPeers
		c.Store.Now = clk.Now
		withAdmin(c)
	})
	y := nodeID("app-y, dial 1")
	publishAs(t, n, "app-y", "y", y, "from y")
	m := scrape(t, n)
	if m[`petrel_identity_bindings{kind="client"}`] != 1 || m[`petrel_identity_bindings{kind="node"}`] != 0 {
		t.Errorf("bindings gauge: %v client, %v node; want 1, 0", m[`petrel_identity_bindings{kind="client"}`], m[`petrel_identity_bindings{kind="node"}`])
	}
	// Another client, and a node, may not prove the id app-y proved.
	claimRefused(t, n, "app-x", "x", y, "app-y")
	claimRefused(t, n, "mallory", "m", y, "app-y")
	// app-y reconnects with its id, near the end of the window: accepted,
	// and the binding is measured from this handshake.
	clk.Add(23 * time.Hour)
	publishAs(t, n, "app-y", "y", y, "from y again")
	clk.Add(23 * time.Hour)
	claimRefused(t, n, "app-x", "x", y, "app-y")
	// A day after app-y's last handshake, the id is free.
	clk.Add(time.Hour)
	mustRawPeer(t, n, "app-x", "x", y).Close()
	claimRefused(t, n, "app-y", "y", y, "app-x")
	if _, bodies := drainBodies(t, n, "orders", []string{"from y", "from y again"}); bodies["from y"] != 1 || bodies["from y again"] != 1 {
		t.Fatalf("delivered %v", bodies)
	}
}

// TestHostileClientIDWindowFollowsDedupe: a dedupe window longer than a
// day holds client ids as long.
func TestHostileClientIDWindowFollowsDedupe(t *testing.T) {
	clk := newTestClock()
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = bindingPeers
		c.Store.Now = clk.Now
		c.Store.DedupeWindow = 72 * time.Hour
	})
	y := nodeID("app-y")
	mustRawPeer(t, n, "app-y", "y", y).Close()
	clk.Add(71 * time.Hour)
	claimRefused(t, n, "app-x", "x", y, "app-y")
	clk.Add(time.Hour)
	mustRawPeer(t, n, "app-x", "x", y).Close()
}

// TestHostileClientBindingsSurviveRestart: a node that stops and starts
// again still refuses a client's id to other identities, and reads the
// bindings file of the first format (node bindings only).
func TestHostileClientBindingsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	plant := nodeID("plant-7")
	legacy := `{"plant-7": "` + plant.String() + `"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "peer-ids.json"), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := petrel.Config{Name: "hub", DataDir: dir, Logger: quiet, Listen: "127.0.0.1:0", Link: nodes.FastLinks,
		Peers: append([]petrel.PeerConfig{{Name: "plant-7", Secret: "p"}}, bindingPeers...)}
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := nodeID("app-y")
	mustRawPeer(t, n, "app-y", "y", y).Close()
	claimRefused(t, n, "app-x", "x", plant, "plant-7")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "peer-ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Nodes   map[string]string
		Clients map[string]struct{ Identity string }
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Nodes["plant-7"] != plant.String() || f.Clients[y.String()].Identity != "app-y" {
		t.Fatalf("bindings written %s (%v)", raw, err)
	}
	n = nodes.Open(t, nodes.Name("hub"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.DataDir, c.Peers = dir, cfg.Peers
	}))
	claimRefused(t, n, "app-x", "x", y, "app-y")
	claimRefused(t, n, "mallory", "m", plant, "plant-7")
	mustRawPeer(t, n, "app-y", "y", y).Close()
}

// TestRemoteAuthFailurePointsAtPeersEntry: a client refused for its
// secret is told where its secret comes from under per-identity
// credentials.
func TestRemoteAuthFailurePointsAtPeersEntry(t *testing.T) {
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) { c.Peers = bindingPeers })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := petrel.Dial(ctx, tcp(n), petrel.DialOptions{Name: "app-y", Secret: "wrong", Logger: quiet})
	if !errors.Is(err, session.ErrAuth) || !strings.Contains(err.Error(), "this client's own entry under the node's peers:") {
		t.Fatalf("dial with a wrong secret: %v", err)
	}
}
