package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// ackCode reads packets until the ack of kind for id, skipping what a
// resumed session may resend first (a PUBREC for a publish still
// unreleased), and returns its reason code.
func ackCode(c *mqttraw.Conn, kind byte, id uint16) byte {
	switch a := c.Until(kind, id).Content.(type) {
	case *packets.Pubrec:
		return a.ReasonCode
	case *packets.Pubcomp:
		return a.ReasonCode
	}
	return 0xff
}

// TestMQTTQoS2ExactlyOnceAcrossKill: a QoS 2 publish whose PUBREC came
// back is not stored twice when its node process is SIGKILLed and
// restarted before the PUBREL. The client, reconnecting to its session,
// sends the PUBLISH again with DUP (its PUBREC was lost, as far as it
// knows) for one message, and the PUBREL for another (MQTT-4.3.3-10,
// MQTT-4.4.0-1); both get their acks with success, and a persistent
// subscriber receives each message exactly once.
func TestMQTTQoS2ExactlyOnceAcrossKill(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	f := nodeproc.NodeFile{Name: "q", DataDir: filepath.Join(dir, "q"),
		Extra: fmt.Sprintf("topics:\n  - pattern: \"t.#\"\nmqtt:\n  listen: %q\n", addr)}
	cfg := filepath.Join(dir, "q.yaml")
	if err := f.Write(cfg); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, ctx, dir, "q", "node", "-c", cfg)
	defer func() { p.Kill() }()

	// A persistent subscriber, away while the messages come.
	sub, _ := mqttraw.Session(t, addr, "counter", true)
	sub.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/#", QoS: 2}}})
	if a := sub.Read(); a.Type != packets.SUBACK {
		t.Fatalf("suback: %v", a)
	}
	sub.Write(&packets.Disconnect{})
	sub.Close()

	pub, _ := mqttraw.Session(t, addr, "pub-q2", true)
	for _, id := range []uint16{7, 8} {
		pub.Write(&packets.Publish{Topic: "t/q2", QoS: 2, PacketID: id, Payload: []byte("m-" + strconv.Itoa(int(id)))})
		if code := ackCode(pub, packets.PUBREC, id); code != 0 {
			t.Fatalf("PUBREC %d: reason 0x%02x", id, code)
		}
	}
	p.Kill()
	p = startProc(t, ctx, dir, "q", "node", "-c", cfg)

	pub, ca := mqttraw.Session(t, addr, "pub-q2", false)
	if !ca.SessionPresent {
		t.Fatal("the publisher's session is not present after the restart")
	}
	// 7: its PUBREC was lost, as far as the client knows: PUBLISH again.
	pub.Write(&packets.Publish{Topic: "t/q2", QoS: 2, PacketID: 7, Duplicate: true, Payload: []byte("m-7")})
	if code := ackCode(pub, packets.PUBREC, 7); code != 0 {
		t.Fatalf("PUBREC 7 again: reason 0x%02x, want 0 (the message is the node's)", code)
	}
	// 8: its PUBREC came: release it.
	pub.Write(&packets.Pubrel{PacketID: 8})
	if code := ackCode(pub, packets.PUBCOMP, 8); code != 0 {
		t.Fatalf("PUBCOMP 8: reason 0x%02x", code)
	}
	pub.Write(&packets.Pubrel{PacketID: 7})
	if code := ackCode(pub, packets.PUBCOMP, 7); code != 0 {
		t.Fatalf("PUBCOMP 7: reason 0x%02x", code)
	}
	// A new publish reusing a released identifier is a new message.
	pub.Write(&packets.Publish{Topic: "t/q2", QoS: 2, PacketID: 7, Payload: []byte("m-7b")})
	if code := ackCode(pub, packets.PUBREC, 7); code != 0 {
		t.Fatalf("PUBREC of a new 7: reason 0x%02x", code)
	}
	pub.Write(&packets.Pubrel{PacketID: 7})
	if code := ackCode(pub, packets.PUBCOMP, 7); code != 0 {
		t.Fatalf("PUBCOMP of a new 7: reason 0x%02x", code)
	}

	got := map[string]int{}
	r := make(chan *paho.Publish, 100)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) { r <- pr.Packet; return true, nil }}})
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	defer ccancel()
	expiry := uint32(3600)
	if _, err := c.Connect(cctx, &paho.Connect{ClientID: "counter", KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	}()
	for len(got) < 3 {
		select {
		case m := <-r:
			got[string(m.Payload)]++
		case <-time.After(petreltest.Patience):
			t.Fatalf("subscriber got %v, want m-7, m-8 and m-7b", got)
		}
	}
	// Anything stored twice comes within this while.
	for quiet := time.After(time.Second); ; {
		select {
		case m := <-r:
			got[string(m.Payload)]++
			continue
		case <-quiet:
		}
		break
	}
	for _, k := range []string{"m-7", "m-8", "m-7b"} {
		if got[k] != 1 {
			t.Errorf("%s received %d times, want once (all: %v)", k, got[k], got)
		}
	}
}
