package mqttgw_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// revokeConfig lists app-1, which may subscribe to sensors.a.# and
// sensors.b.#, and app-2.
func revokeConfig(t *testing.T) petrel.Config {
	cfg := baseConfig(t)
	cfg.Peers = []petrel.PeerConfig{
		{Name: "app-1", Secret: "s3cret-app-1", Kind: petrel.PeerKindClient},
		{Name: "app-2", Secret: "s3cret-app-2", Kind: petrel.PeerKindClient},
	}
	cfg.Access = []petrel.AccessRule{{Identity: "*", Publish: []string{"#"}, Subscribe: []string{"sensors.a.#", "sensors.b.#"}}}
	return cfg
}

// revokeClient connects app-1's persistent session "keeper", acking by
// hand; gone gets a DISCONNECT from the node.
func revokeClient(t *testing.T, tn *testNode, clean bool) (*paho.Client, *received, chan *paho.Disconnect) {
	t.Helper()
	r := newReceived()
	gone := make(chan *paho.Disconnect, 1)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "keeper", CleanStart: clean, KeepAlive: 30,
		Username: "app-1", UsernameFlag: true, Password: []byte("s3cret-app-1"), PasswordFlag: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600)), RequestProblemInfo: true}},
		paho.ClientConfig{EnableManualAcknowledgment: true, OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler},
			OnServerDisconnect: func(d *paho.Disconnect) { gone <- d }})
	return c, r, gone
}

func (tn *testNode) send(topic string) {
	tn.t.Helper()
	p := tn.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage(topic)); err != nil {
		tn.t.Fatal(err)
	}
}

// disconnected waits for the node's DISCONNECT and checks its reason
// code, 0x87 not authorized, and that its reason string names why.
func disconnected(t *testing.T, gone chan *paho.Disconnect, why string) {
	t.Helper()
	select {
	case d := <-gone:
		reason := ""
		if d.Properties != nil {
			reason = d.Properties.ReasonString
		}
		if d.ReasonCode != 0x87 || !strings.Contains(reason, why) {
			t.Fatalf("disconnect 0x%02x %q, want 0x87 naming %q", d.ReasonCode, reason, why)
		}
	case <-time.After(petreltest.Patience):
		t.Fatal("no DISCONNECT from the node after the reload")
	}
}

// A reload that revokes a subscribe right ends the MQTT filter it
// allowed: nothing published after it is delivered on it, the client is
// told (DISCONNECT 0x87), and its persistent session resumes without the
// filter, while the filter it still may hold keeps what it had in flight.
func TestMQTTRevokedSubscribeRight(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	c, r, gone := revokeClient(t, tn, true)
	if codes := subscribeCodes(t, c, "sensors/a/#", "sensors/b/#"); codes[0] != 1 || codes[1] != 1 {
		t.Fatalf("suback %v", codes)
	}
	tn.send("sensors.b.held") // in flight: never acked
	if p := r.next(t); p.Topic != "sensors/b/held" {
		t.Fatalf("got %s", p.Topic)
	}

	cfg := tn.cfg
	cfg.Access = []petrel.AccessRule{{Identity: "*", Publish: []string{"#"}, Subscribe: []string{"sensors.b.#"}}}
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	tn.send("sensors.a.after")
	tn.send("sensors.b.after")
	disconnected(t, gone, `filter "sensors/a/#"`)
	for {
		select {
		case p := <-r.ch:
			if strings.HasPrefix(p.Topic, "sensors/a/") {
				t.Fatalf("%s delivered after its filter was revoked", p.Topic)
			}
			continue
		default:
		}
		break
	}
	petreltest.Eventually(t, "revoked filter's subscription deleted", func() bool { return len(tn.Subscriptions()) == 1 })

	_, r, _ = revokeClient(t, tn, false)
	got := map[string]bool{}
	for range 2 {
		p := r.next(t)
		got[p.Topic] = true
	}
	if !got["sensors/b/held"] || !got["sensors/b/after"] {
		t.Fatalf("after reconnect: %v, want sensors/b/held and sensors/b/after", got)
	}
	r.none(t, 300*time.Millisecond)
}

// A reload that removes a connected MQTT client's identity from peers
// disconnects it (0x87) before anything published after it is delivered;
// it cannot connect again.
func TestMQTTRemovedIdentityDisconnected(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	c, r, gone := revokeClient(t, tn, true)
	subscribeCodes(t, c, "sensors/a/#")

	cfg := tn.cfg
	cfg.Peers = cfg.Peers[1:]
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	tn.send("sensors.a.after")
	disconnected(t, gone, `identity "app-1" was removed from peers`)
	r.none(t, 300*time.Millisecond)

	conn, err := netDial(tn)
	if err != nil {
		t.Fatal(err)
	}
	again := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := again.Connect(ctx, &paho.Connect{ClientID: "keeper", Username: "app-1", UsernameFlag: true, Password: []byte("s3cret-app-1"), PasswordFlag: true})
	<-again.Done()
	if err == nil || ca == nil || ca.ReasonCode != 0x86 {
		t.Fatalf("reconnect of a removed identity: %+v, %v; want CONNACK 0x86", ca, err)
	}
}

// A filter revoked while its persistent session's client is away is
// removed from the session at the reload, with its subscription and what
// it kept meanwhile, rather than collecting until the client comes back:
// the client resumes with only the filter it may hold, and is not cut.
func TestMQTTRevokedWhileAwayNotResumed(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	c, _, _ := revokeClient(t, tn, true)
	subscribeCodes(t, c, "sensors/a/#", "sensors/b/#")
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	tn.subscribed(2)
	// Away for the node too: a reload that still found it connected would
	// cut it as a connected client.
	petreltest.Eventually(t, "the client gone at the node", func() bool { return tn.Status().MQTT.Clients == 0 })
	tn.send("sensors.a.away")
	tn.send("sensors.b.away")

	cfg := tn.cfg
	cfg.Access = []petrel.AccessRule{{Identity: "*", Publish: []string{"#"}, Subscribe: []string{"sensors.b.#"}}}
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the revoked filter's subscription deleted while the client is away", func() bool { return len(tn.Subscriptions()) == 1 })
	tn.send("sensors.a.later") // collected by no one

	c2, r, gone := revokeClient(t, tn, false)
	if p := r.next(t); p.Topic != "sensors/b/away" {
		t.Fatalf("%s delivered after its filter was revoked", p.Topic)
	}
	r.none(t, 300*time.Millisecond)
	select {
	case d := <-gone:
		t.Fatalf("the resumed session was cut: %+v", d)
	case <-c2.Done():
		t.Fatal("the resumed session lost its connection")
	default:
	}
}

// awayClient connects identity's persistent session id, subscribes it to
// filters, and disconnects it; the node keeps the session.
func awayClient(t *testing.T, tn *testNode, id, identity, password string, filters ...string) {
	t.Helper()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
		Username: identity, UsernameFlag: true, Password: []byte(password), PasswordFlag: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}}, paho.ClientConfig{})
	subscribeCodes(t, c, filters...)
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
}

// A reload that removes an identity from peers drops its persistent
// sessions, those of clients away and of one connected (which is cut):
// their subscriptions are deleted with what they kept, and nothing
// published after collects for them. Another identity's session stays.
func TestMQTTRemovedIdentitySessionsDropped(t *testing.T) {
	tn := openNode(t, revokeConfig(t))
	awayClient(t, tn, "away-1", "app-1", "s3cret-app-1", "sensors/a/#", "sensors/b/#")
	awayClient(t, tn, "away-2", "app-2", "s3cret-app-2", "sensors/a/#")
	live, _, _ := revokeClient(t, tn, true)
	subscribeCodes(t, live, "sensors/b/#")
	tn.subscribed(4)
	petreltest.Eventually(t, "two clients away", func() bool { return tn.Status().MQTT.Clients == 1 })
	tn.send("sensors.a.away")
	tn.send("sensors.b.away")

	cfg := tn.cfg
	cfg.Peers = cfg.Peers[1:]
	if _, err := tn.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Its DISCONNECT is TestMQTTRemovedIdentityDisconnected's: paho may
	// see the connection end first under the race detector.
	select {
	case <-live.Done():
	case <-time.After(petreltest.Patience):
		t.Fatal("app-1's connected client kept its connection")
	}
	petreltest.Eventually(t, "app-1's sessions dropped", func() bool {
		st := tn.Status().MQTT
		return len(tn.Subscriptions()) == 1 && st.Persistent == 1
	}, func() string { return fmt.Sprintf("%+v %+v", tn.Subscriptions(), tn.Status().MQTT) })
	tn.send("sensors.a.after")
	tn.send("sensors.b.after")
	subs := tn.Subscriptions()
	if len(subs) != 1 || subs[0].Depth != 2 {
		t.Fatalf("subscriptions %+v, want app-2's alone, holding sensors.a.away and sensors.a.after", subs)
	}
}
