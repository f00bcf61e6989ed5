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

// Changed secrets: a connection proved a secret at its handshake. A
// reload that changes that secret, often to retire one that leaked,
// closes the connections that proved the old one; they must prove the
// new one to come back. Connections whose secret did not change stay up.

// up reports whether c is still connected.
func up(c *session.Conn) bool {
	select {
	case <-c.Done():
		return false
	default:
		return true
	}
}

// closedWithin waits for c to close.
func closedWithin(t *testing.T, name string, c *session.Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(petreltest.Patience):
		t.Fatalf("the connection of %s is still up after its secret changed", name)
	}
}

// TestReconfigureCutsChangedSecrets: a node and a client identity whose
// secrets change are cut, the client's subscription told why; an
// identity whose secret did not change keeps its connection. The old
// secret is refused after, the new one admitted.
func TestReconfigureCutsChangedSecrets(t *testing.T) {
	n, cfg := hostileHub(t,
		petrel.PeerConfig{Name: "plant-7", Secret: "old-p"},
		petrel.PeerConfig{Name: "plant-8", Secret: "same"},
		petrel.PeerConfig{Name: "app-1", Secret: "old-a", Kind: petrel.PeerKindClient})
	plant := mustRawPeer(t, n, "plant-7", "old-p", nodeID("plant-7"))
	kept := mustRawPeer(t, n, "plant-8", "same", nodeID("plant-8"))
	app := mustRawPeer(t, n, "app-1", "old-a", nodeID("app-1"))
	sub, err := app.OpenSubscribe(context.Background(), "orders", 10)
	if err != nil {
		t.Fatal(err)
	}

	cfg.Peers = []petrel.PeerConfig{
		{Name: "plant-7", Secret: "new-p"},
		{Name: "plant-8", Secret: "same"},
		{Name: "app-1", Secret: "new-a", Kind: petrel.PeerKindClient},
	}
	if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, "plant-7", plant)
	closedWithin(t, "app-1", app)
	if err := sub.Err(); !errors.Is(err, session.ErrDenied) || !strings.Contains(err.Error(), `the secret of identity "app-1" changed`) {
		t.Fatalf("app-1's subscription ended with %v, want a denial naming the changed secret", err)
	}
	if !up(kept) {
		t.Fatal("plant-8, whose secret did not change, lost its connection")
	}
	if got := sendAll(t, openLink(t, kept), msg(nodeID("plant-8"), 1, "still here")); got[0] != "" {
		t.Fatalf("plant-8's link refused after the reload: %s", got[0])
	}
	if _, err := rawPeer(t, n, "plant-7", "old-p", nodeID("plant-7")); !errors.Is(err, session.ErrAuth) {
		t.Fatalf("plant-7 with its old secret: %v, want ErrAuth", err)
	}
	plant = mustRawPeer(t, n, "plant-7", "new-p", nodeID("plant-7"))
	if got := sendAll(t, openLink(t, plant), msg(nodeID("plant-7"), 1, "rotated")); got[0] != "" {
		t.Fatalf("plant-7 with its new secret refused: %s", got[0])
	}
}

// TestReconfigureChangedSecretEndsClientConsumer: a Go client's consumer
// whose identity's secret changed gets ErrDenied naming the change, and
// the client dialled again with the new secret consumes.
func TestReconfigureChangedSecretEndsClientConsumer(t *testing.T) {
	n, cfg := revokeHub(t)
	c := nodes.Dial(t, n, petrel.DialOptions{Name: "app-1", Secret: "app-secret"})
	cons := consumer(t, c, "orders")
	sendOne(t, n, "orders", "before")
	if d := receive(t, cons); string(d.Body) != "before" || d.Ack() != nil {
		t.Fatalf("first delivery %q", d.Body)
	}
	// A remote ack is flushed in the background; one still on its way
	// when the connection is cut is lost, and "before" rightly delivered
	// again.
	petreltest.Eventually(t, "the ack taken", func() bool {
		st, _ := n.QueueStat("orders")
		return st.Depth == 0 && st.InFlight == 0
	})

	cfg.Peers = slices.Clone(cfg.Peers) // not the running config's array
	cfg.Peers[1].Secret = "rotated"
	if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	err := receiveErr(t, cons)
	if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `the secret of identity "app-1" changed`) {
		t.Fatalf("the consumer's Receive after the secret changed: %v, want ErrDenied naming the change", err)
	}
	c = nodes.Dial(t, n, petrel.DialOptions{Name: "app-1", Secret: "rotated"})
	cons = consumer(t, c, "orders")
	sendOne(t, n, "orders", "after")
	if d := receive(t, cons); string(d.Body) != "after" {
		t.Fatalf("delivery after the rotation %q", d.Body)
	}
}

// TestReconfigureCutsChangedSharedSecret: without peers, every link
// proved the network's shared secret; changing it closes them.
func TestReconfigureCutsChangedSharedSecret(t *testing.T) {
	var cfg petrel.Config
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Secret = "old-shared"
		cfg = *c
	})
	peer := mustRawPeer(t, n, "plant-7", "old-shared", nodeID("plant-7"))
	cfg.Secret = "new-shared"
	if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, "plant-7", peer)
	peer = mustRawPeer(t, n, "plant-7", "new-shared", nodeID("plant-7"))
	if got := sendAll(t, openLink(t, peer), msg(nodeID("plant-7"), 1, "rotated")); got[0] != "" {
		t.Fatalf("plant-7 with the new shared secret refused: %s", got[0])
	}
}
