package mqttgw_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// secretClient connects identity with password as client id, a clean
// session; gone gets a DISCONNECT from the node.
func secretClient(t *testing.T, tn *testNode, id, identity, password string) (*paho.Client, *received, chan *paho.Disconnect) {
	t.Helper()
	r := newReceived()
	gone := make(chan *paho.Disconnect, 1)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
		Username: identity, UsernameFlag: true, Password: []byte(password), PasswordFlag: true,
		Properties: &paho.ConnectProperties{RequestProblemInfo: true}},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler},
			OnServerDisconnect: func(d *paho.Disconnect) { gone <- d }})
	return c, r, gone
}

// connackCode connects identity with password and returns the CONNACK's
// reason code.
func connackCode(t *testing.T, tn *testNode, id, identity, password string) byte {
	t.Helper()
	conn, err := netDial(tn)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, Username: identity, UsernameFlag: true, Password: []byte(password), PasswordFlag: true})
	if err == nil {
		_ = c.Disconnect(&paho.Disconnect{})
	}
	<-c.Done()
	if ca == nil {
		t.Fatalf("connect as %s: no CONNACK: %v", identity, err)
	}
	return ca.ReasonCode
}

// A reload that changes an identity's secret disconnects the MQTT
// clients that proved the old one with their password (0x87, naming the
// change); they must prove the new one to come back. A client of an
// identity whose secret did not change stays connected.
func TestMQTTChangedSecretDisconnected(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	c1, _, gone1 := secretClient(t, tn, "one", "app-1", "s3cret-app-1")
	c2, r2, gone2 := secretClient(t, tn, "two", "app-2", "s3cret-app-2")
	subscribeCodes(t, c1, "sensors/a/#")
	subscribeCodes(t, c2, "sensors/a/#")

	cfg := tn.cfg
	cfg.Peers = slices.Clone(cfg.Peers)
	cfg.Peers[0].Secret = "rotated-app-1"
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	disconnected(t, gone1, `the secret of identity "app-1" changed`)
	tn.send("sensors.a.after")
	if p := r2.next(t); p.Topic != "sensors/a/after" {
		t.Fatalf("app-2 got %s", p.Topic)
	}
	select {
	case d := <-gone2:
		t.Fatalf("app-2, whose secret did not change, was disconnected: %+v", d)
	default:
	}
	if code := connackCode(t, tn, "one", "app-1", "s3cret-app-1"); code != 0x86 {
		t.Fatalf("app-1 with its old secret: CONNACK 0x%02x, want 0x86", code)
	}
	if code := connackCode(t, tn, "one", "app-1", "rotated-app-1"); code != 0 {
		t.Fatalf("app-1 with its new secret: CONNACK 0x%02x, want success", code)
	}
}

// Without peers, a client that proved the node's shared secret as its
// password is disconnected when the shared secret changes.
func TestMQTTChangedSharedSecretDisconnected(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Secret = "shared-1"
	tn := openNode(t, cfg)
	_, _, gone := secretClient(t, tn, "one", "anyone", "shared-1")
	cfg = tn.cfg
	cfg.Secret = "shared-2"
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	disconnected(t, gone, "shared secret changed")
	if code := connackCode(t, tn, "one", "anyone", "shared-2"); code != 0 {
		t.Fatalf("with the new shared secret: CONNACK 0x%02x, want success", code)
	}
}

// A persistent session whose identity's secret changed is not dropped
// with its connection: the client resumes it with the new secret, and
// gets what was published meanwhile.
func TestMQTTChangedSecretKeepsSession(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	c, _, _ := revokeClient(t, tn, true)
	subscribeCodes(t, c, "sensors/a/#")
	cfg := tn.cfg
	cfg.Peers = slices.Clone(cfg.Peers)
	cfg.Peers[0].Secret = "rotated-app-1"
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client of the changed secret kept its connection")
	}
	tn.send("sensors.a.meanwhile")
	r := newReceived()
	_, ca := pahoClient(t, tn, &paho.Connect{ClientID: "keeper", KeepAlive: 30,
		Username: "app-1", UsernameFlag: true, Password: []byte("rotated-app-1"), PasswordFlag: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	if !ca.SessionPresent {
		t.Fatal("the session was not kept for the new secret")
	}
	if p := r.next(t); p.Topic != "sensors/a/meanwhile" {
		t.Fatalf("got %s", p.Topic)
	}
}
