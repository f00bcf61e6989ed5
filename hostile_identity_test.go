package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// The hostile-peer suite for identities: a raw peer, built from the
// session package, tries what a peer holding some credentials could try.
// Each attempt must fail with a clear refusal and change nothing on the
// node.

// hostileHub opens node "hub" that lists peers, and returns it with its
// configuration (for Reconfigure) and data directory.
func hostileHub(t *testing.T, peers ...petrel.PeerConfig) (*petrel.Node, petrel.Config) {
	t.Helper()
	var cfg petrel.Config
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = peers
		cfg = *c
	})
	return n, cfg
}

// nodeID returns a fixed id for a test identity.
func nodeID(s string) message.NodeID {
	var id message.NodeID
	copy(id[:], s)
	return id
}

// rawPeer runs the client handshake with n as name, proving id and
// secret. The connection is closed when the test ends.
func rawPeer(t *testing.T, n *petrel.Node, name, secret string, id message.NodeID) (*session.Conn, error) {
	t.Helper()
	nc, err := net.Dial("tcp", n.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Name: name, ID: id, Logger: quiet}
	if secret != "" {
		cfg.Secret = []byte(secret)
	}
	c, err := session.Client(context.Background(), nc, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func mustRawPeer(t *testing.T, n *petrel.Node, name, secret string, id message.NodeID) *session.Conn {
	t.Helper()
	c, err := rawPeer(t, n, name, secret, id)
	if err != nil {
		t.Fatalf("handshake as %s: %v", name, err)
	}
	return c
}

// msg makes a data message for "orders" with a hand-made origin and id.
func msg(origin message.NodeID, id uint64, body string) *message.Message {
	return &message.Message{ID: id, Origin: origin, Destination: "orders", Kind: message.KindData,
		Priority: 4, Timestamp: time.Now(), Body: []byte(body)}
}

// sendAll sends ms as Data 1..len(ms) on sess and returns, per message,
// the reason it was refused ("" if acked).
func sendAll(t *testing.T, sess *session.Session, ms ...*message.Message) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, m := range ms {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.SendData(ctx, uint64(i+1), b); err != nil {
			t.Fatal(err)
		}
	}
	reasons := make([]string, len(ms))
	var done uint64
	for done < uint64(len(ms)) {
		select {
		case a, ok := <-sess.Acks():
			if !ok {
				t.Fatalf("session ended after %d of %d answers: %v", done, len(ms), sess.Err())
			}
			if a.Refused {
				reasons[a.Seq-1] = a.Reason
			}
			done = max(done, a.Seq)
		case <-ctx.Done():
			t.Fatalf("%d of %d answers", done, len(ms))
		}
	}
	return reasons
}

func openLink(t *testing.T, c *session.Conn) *session.Session {
	t.Helper()
	sess, err := c.Open(context.Background(), "orders@hub", 100)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func depth(n *petrel.Node, q string) int64 {
	st, _ := n.QueueStat(q)
	return st.Depth
}

func TestHostileForgedOrigin(t *testing.T) {
	n, _ := hostileHub(t,
		petrel.PeerConfig{Name: "mallory", Secret: "m"},
		petrel.PeerConfig{Name: "plant-7", Secret: "p"},
		petrel.PeerConfig{Name: "relay-1", Secret: "r", Relay: true})
	mallory, victim := nodeID("mallory"), nodeID("plant-7")
	sess := openLink(t, mustRawPeer(t, n, "mallory", "m", mallory))
	got := sendAll(t, sess, msg(victim, 100, "forged"), msg(victim, 101, "forged"), msg(mallory, 1, "own"))
	for i, r := range got[:2] {
		if !strings.Contains(r, "is not a permitted relay here") || !strings.Contains(r, victim.String()) {
			t.Errorf("forged message %d: refusal %q, want one naming the origin and the relay rule", i, r)
		}
	}
	if got[2] != "" {
		t.Fatalf("mallory's own message refused: %s", got[2])
	}
	if d := depth(n, "orders"); d != 1 {
		t.Fatalf("orders holds %d messages, want only mallory's own", d)
	}
	if st := n.ReceiverStats(); st.ForgedOrigins != 2 {
		t.Errorf("forged origins counted %d, want 2", st.ForgedOrigins)
	}

	// A permitted relay hands over the messages of the nodes behind it.
	rsess := openLink(t, mustRawPeer(t, n, "relay-1", "r", nodeID("relay-1")))
	if got := sendAll(t, rsess, msg(nodeID("far-away"), 7, "relayed")); got[0] != "" {
		t.Fatalf("relay refused: %s", got[0])
	}
}

// TestHostilePreStoredIDs: mallory sends the victim's future ids first;
// the victim's real messages with those ids must all be stored.
func TestHostilePreStoredIDs(t *testing.T) {
	n, _ := hostileHub(t, petrel.PeerConfig{Name: "mallory", Secret: "m"}, petrel.PeerConfig{Name: "plant-7", Secret: "p"})
	victim := nodeID("plant-7")
	var forged, real []*message.Message
	for id := uint64(1000); id < 1010; id++ {
		forged = append(forged, msg(victim, id, fmt.Sprint("forged-", id)))
		real = append(real, msg(victim, id, fmt.Sprint("real-", id)))
	}
	msess := openLink(t, mustRawPeer(t, n, "mallory", "m", nodeID("mallory")))
	for i, r := range sendAll(t, msess, forged...) {
		if r == "" {
			t.Fatalf("forged message %d accepted", i)
		}
	}
	if _, ok := n.QueueStat("orders"); ok {
		t.Fatal("the forged messages created the queue")
	}
	vsess := openLink(t, mustRawPeer(t, n, "plant-7", "p", victim))
	for i, r := range sendAll(t, vsess, real...) {
		if r != "" {
			t.Fatalf("the victim's message %d refused: %s", i, r)
		}
	}
	_, bodies := drainBodies(t, n, "orders", bodiesOf(real))
	for b := range bodies {
		if !strings.HasPrefix(b, "real-") {
			t.Fatalf("delivered %v, want the %d real messages only", bodies, len(real))
		}
	}
	if st, _ := n.QueueStat("orders"); st.Deduped != 0 {
		t.Fatalf("%d of the victim's messages were dropped as duplicates", st.Deduped)
	}
}

func TestHostileClientSessions(t *testing.T) {
	n, _ := hostileHub(t, petrel.PeerConfig{Name: "app-1", Secret: "a", Kind: petrel.PeerKindClient})
	app := nodeID("app-1")
	c := mustRawPeer(t, n, "app-1", "a", app)
	ctx := context.Background()
	for _, open := range []func() (*session.Session, error){
		func() (*session.Session, error) { return c.Open(ctx, "orders@hub", 10) },
		func() (*session.Session, error) { return c.OpenFile(ctx, "orders@hub", 10) },
	} {
		sess, err := open()
		if sess != nil || !errors.Is(err, session.ErrRefused) || !strings.Contains(err.Error(), `"app-1" is a client identity`) {
			t.Fatalf("client opened a link or file session: %v, %v", sess, err)
		}
	}
	if st := n.ReceiverStats(); st.ClientLinkRefused != 2 {
		t.Errorf("refusals counted %d, want 2", st.ClientLinkRefused)
	}
	// It may publish, only messages of its own origin.
	pub, err := c.OpenPublish(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := sendAll(t, pub, msg(nodeID("plant-7"), 5, "forged"), msg(app, 5, "own"))
	if !strings.Contains(got[0], "a client publishes only messages of its own origin") || got[1] != "" {
		t.Fatalf("publish answers %q", got)
	}
	if d := depth(n, "orders"); d != 1 {
		t.Fatalf("orders holds %d, want the client's own message only", d)
	}
}

func TestHostileBadCredentials(t *testing.T) {
	n, cfg := hostileHub(t, petrel.PeerConfig{Name: "plant-7", Secret: "p"})
	tests := []struct {
		name, peer, secret string
		reason             string
	}{
		{"wrong secret", "plant-7", "guess", `client "plant-7" sent a wrong MAC`},
		{"no secret", "plant-7", "", `client "plant-7" sent no MAC, but this side requires the secret of identity "plant-7" (its peers entry)`},
		{"valid but unlisted", "plant-8", "p", `no credentials for identity "plant-8" on this node`},
		{"path in the name", "../x", "p", "not a valid name"},
		{"space in the name", "plant 7", "p", "not a valid name"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := rawPeer(t, n, tc.peer, tc.secret, nodeID(tc.peer))
			if c != nil || !errors.Is(err, session.ErrAuth) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("handshake: %v, want ErrAuth with %q", err, tc.reason)
			}
			eventually(t, func() bool { return n.ReceiverStats().AuthFailed == int64(i+1) }, "the failure counted")
		})
	}
	if len(n.QueueStats()) != 0 {
		t.Errorf("queues appeared: %+v", n.QueueStats())
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "peer-ids.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused identity was bound: %v", err)
	}
}

// TestHostileClaimsBoundID: an identity cannot prove an id bound to
// another, nor the node's own; a rebuilt node is re-bound by a pin.
func TestHostileClaimsBoundID(t *testing.T) {
	peers := []petrel.PeerConfig{{Name: "mallory", Secret: "m"}, {Name: "plant-7", Secret: "p"}}
	n, cfg := hostileHub(t, peers...)
	victim := nodeID("plant-7")
	// Bound on first use: the first link it opens.
	vc := mustRawPeer(t, n, "plant-7", "p", victim)
	openLink(t, vc)
	vc.Close()
	for _, id := range []message.NodeID{victim, n.ID()} {
		c, err := rawPeer(t, n, "mallory", "m", id)
		if c != nil || !errors.Is(err, session.ErrAuth) {
			t.Fatalf("mallory proved id %s: %v", id, err)
		}
	}
	if _, err := rawPeer(t, n, "mallory", "m", victim); !strings.Contains(err.Error(), `which is bound to identity "plant-7"`) {
		t.Errorf("refusal %v does not name the owner", err)
	}
	// plant-7 rebuilt, with a new id: refused until the operator pins it.
	rebuilt := nodeID("plant-7 rebuilt")
	if _, err := rawPeer(t, n, "plant-7", "p", rebuilt); !errors.Is(err, session.ErrAuth) || !strings.Contains(err.Error(), "pin the new id") {
		t.Fatalf("rebuilt plant-7: %v, want a refusal saying how to re-bind", err)
	}
	cfg.Peers = []petrel.PeerConfig{peers[0], {Name: "plant-7", Secret: "p", ID: rebuilt}}
	if _, err := n.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	mustRawPeer(t, n, "plant-7", "p", rebuilt)
	// The old id is free of plant-7 now, but still no one else's to take
	// until the operator frees it; the node's own id never is.
	if c, err := rawPeer(t, n, "mallory", "m", n.ID()); c != nil || !errors.Is(err, session.ErrAuth) {
		t.Fatalf("mallory proved the node's id: %v", err)
	}
}

// TestHostileFileOriginForged: the announcement of a file session is held
// to the same rule.
func TestHostileFileOriginForged(t *testing.T) {
	n, _ := hostileHub(t, petrel.PeerConfig{Name: "mallory", Secret: "m"})
	c := mustRawPeer(t, n, "mallory", "m", nodeID("mallory"))
	sess, err := c.OpenFile(context.Background(), "orders@hub", 16)
	if err != nil {
		t.Fatal(err)
	}
	m := msg(nodeID("plant-7"), 9, "")
	m.Kind = message.KindFile
	m.File = message.FileProps{Filename: "x", Filesize: 0,
		FileChecksum: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.SendData(context.Background(), 0, b); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-sess.Acks():
		if !a.Refused || !strings.Contains(a.Reason, "is not a permitted relay here") {
			t.Fatalf("announcement answered %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the announcement")
	}
	if _, ok := n.QueueStat("orders"); ok || len(n.Transfers()) != 0 {
		t.Fatal("the forged announcement left a queue or a transfer")
	}
}

// TestHostileLinkWithOwnSecrets: two real nodes link with a secret of
// their own pair; a third with the right name but not the secret cannot.
func TestHostileLinkWithOwnSecrets(t *testing.T) {
	hub, _ := hostileHub(t, petrel.PeerConfig{Name: "plant-7", Secret: "pair"})
	plant := openNode(t, "plant-7", "", func(c *petrel.Config) {
		c.Secret = "shared, refused by the hub"
		c.Nodes = []petrel.NodeConfig{{Name: "hub", Connector: tcp(hub), Secret: "pair"}}
	})
	sendOne(t, plant, "orders@hub", "hello")
	if _, bodies := drainBodies(t, hub, "orders", []string{"hello"}, plant); bodies["hello"] != 1 {
		t.Fatalf("delivered %v", bodies)
	}
}
