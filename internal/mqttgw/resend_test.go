package mqttgw_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// What a persistent session had in flight when its connection ended goes
// to its next connection under the same packet identifiers
// (MQTT-4.4.0-1): the QoS 1 and 2 PUBLISHes not acknowledged again, with
// DUP set, and, for the QoS 2 one whose PUBREC came, its PUBREL alone,
// not its PUBLISH again under a new identifier, which a client that hands
// a message over as its PUBLISH arrives (paho.golang) would take for a
// second message. Each completes as usual, and nothing is left to
// deliver or noted after.
func TestResendUnderPacketIdentifiers(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)

	sub := subscribedSession(t, tn, "resumer")
	publishAll(t, tn, rawPub{"t/released", 2}, rawPub{"t/one", 1}, rawPub{"t/two", 2})

	// The first connection gets the three, and acknowledges the first
	// one's PUBLISH (PUBREC) only: the node answers with its PUBREL, and
	// the connection ends before the PUBCOMP.
	ids := map[string]uint16{}
	for range 3 {
		p := sub.Until(packets.PUBLISH, 0).Content.(*packets.Publish)
		if p.Duplicate {
			t.Fatalf("first delivery of %s has DUP set", p.Topic)
		}
		ids[p.Topic] = p.PacketID
	}
	sub.Write(&packets.Pubrec{PacketID: ids["t/released"]})
	sub.Until(packets.PUBREL, ids["t/released"])
	sub.Close()
	petreltest.Eventually(t, "the three noted", func() bool { return tn.Status().MQTT.ResendNoted == 3 })
	if m := metricsText(t, tn); !strings.Contains(m, "petrel_mqtt_resend_noted 3") {
		t.Error("/metrics lacks petrel_mqtt_resend_noted 3")
	}

	sub = resumeSession(t, tn, "resumer")
	got := map[string]bool{}
	for range 3 {
		p := sub.Read()
		switch c := p.Content.(type) {
		case *packets.Pubrel:
			if c.PacketID != ids["t/released"] {
				t.Fatalf("PUBREL %d, want %d", c.PacketID, ids["t/released"])
			}
			got["PUBREL t/released"] = true
			sub.Write(&packets.Pubcomp{PacketID: c.PacketID})
		case *packets.Publish:
			if c.Topic == "t/released" {
				t.Fatalf("PUBLISH of t/released again (id %d): its PUBREC came, so only its PUBREL goes", c.PacketID)
			}
			if c.PacketID != ids[c.Topic] || !c.Duplicate {
				t.Fatalf("%s again under id %d dup=%v, want id %d and DUP", c.Topic, c.PacketID, c.Duplicate, ids[c.Topic])
			}
			got["PUBLISH "+c.Topic] = true
			if c.QoS == 1 {
				sub.Write(&packets.Puback{PacketID: c.PacketID})
			} else {
				sub.Write(&packets.Pubrec{PacketID: c.PacketID})
				sub.Until(packets.PUBREL, c.PacketID)
				sub.Write(&packets.Pubcomp{PacketID: c.PacketID})
			}
		default:
			t.Fatalf("unexpected %v", p)
		}
	}
	if len(got) != 3 {
		t.Fatalf("resent %v", got)
	}
	petreltest.Eventually(t, "all acknowledged", func() bool {
		st := tn.Status().MQTT
		return st.Acked == 3 && tn.Subscriptions()[0].Depth == 0
	})
	if st := tn.Status().MQTT; st.ResendNoted != 0 || st.ResentReleases != 1 {
		t.Fatalf("noted %d, releases %d; want 0 and 1", st.ResendNoted, st.ResentReleases)
	}
}

// paho.golang hands a QoS 2 message to its handler as the PUBLISH
// arrives, then keeps the identifier until the PUBREL. A connection cut
// between its PUBREC and the node's PUBREL, then resumed with the same
// session state, completes the flow with the PUBREL the node sends again:
// the handler ran once. Before, the node delivered the message again
// under a new identifier, and the handler ran twice.
func TestPahoQoS2OnceAcrossReconnect(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	sess := state.NewInMemory()
	t.Cleanup(func() { _ = sess.Close() })
	var handled atomic.Int32
	connect := func(conn net.Conn) *paho.Client {
		c := paho.NewClient(paho.ClientConfig{Conn: conn, Session: sess,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) {
				handled.Add(1)
				return true, nil
			}}})
		ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
		defer cancel()
		if _, err := c.Connect(ctx, &paho.Connect{ClientID: "once", CleanStart: false, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	raw, err := net.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutAtPubrel{Conn: raw, r: bufio.NewReader(raw)}
	c := connect(cut)
	subscribe(t, c, "t/#", 2)
	tn.subscribed(1)

	publishAll(t, tn, rawPub{"t/once", 2})

	select {
	case <-c.Done(): // cut at the PUBREL, the handler having run
	case <-time.After(petreltest.Patience):
		t.Fatal("no PUBREL came")
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("handler ran %d times before the cut, want 1", n)
	}
	petreltest.Eventually(t, "noted", func() bool { return tn.Status().MQTT.ResendNoted == 1 })

	again, err := net.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c = connect(again)
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	petreltest.Eventually(t, "completed", func() bool {
		st := tn.Status().MQTT
		return st.Acked == 1 && tn.Subscriptions()[0].Depth == 0
	})
	time.Sleep(100 * time.Millisecond) // a second delivery, were there one, would be on its way
	if n := handled.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := tn.Status().MQTT.ResentReleases; n != 1 {
		t.Fatalf("%d PUBRELs resent, want 1", n)
	}
}

// cutAtPubrel is a client's connection that ends as the first PUBREL from
// the node arrives, before the client reads it.
type cutAtPubrel struct {
	net.Conn
	r    *bufio.Reader
	left []byte
}

func (c *cutAtPubrel) Read(p []byte) (int, error) {
	if len(c.left) == 0 {
		pk, err := readFrame(c.r)
		if err != nil {
			return 0, err
		}
		if pk[0]>>4 == packets.PUBREL {
			c.Conn.Close()
			return 0, io.EOF
		}
		c.left = pk
	}
	n := copy(p, c.left)
	c.left = c.left[n:]
	return n, nil
}

// readFrame reads one MQTT packet whole: its fixed header byte, its
// remaining length and what that says follows.
func readFrame(r *bufio.Reader) ([]byte, error) {
	b0, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	frame := []byte{b0}
	n, shift := 0, 0
	for i := 0; ; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		frame = append(frame, b)
		n |= int(b&0x7f) << shift
		shift += 7
		if b&0x80 == 0 {
			break
		}
		if i == 3 {
			return nil, fmt.Errorf("remaining length over 4 bytes")
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(frame, body...), nil
}

// A QoS 2 delivery whose PUBREC came is kept in the node's store before
// its PUBREL goes: after a node restart the resumed session gets the
// PUBREL under the same identifier, not the message again, and once its
// PUBCOMP came nothing of it is left for the next restart.
func TestResendReleaseAcrossRestart(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	sub := subscribedSession(t, tn, "restarted")
	publishAll(t, tn, rawPub{"t/kept", 2})

	id := sub.Until(packets.PUBLISH, 0).PacketID()
	sub.Write(&packets.Pubrec{PacketID: id})
	sub.Until(packets.PUBREL, id)
	sub.Close()
	tn.restart()
	if n := tn.Status().MQTT.ResendNoted; n != 1 {
		t.Fatalf("%d noted after the restart, want 1", n)
	}

	sub = resumeSession(t, tn, "restarted")
	p := sub.Read()
	if rel, ok := p.Content.(*packets.Pubrel); !ok || rel.PacketID != id {
		t.Fatalf("after the restart: %v, want PUBREL %d", p, id)
	}
	sub.Write(&packets.Pubcomp{PacketID: id})
	completedAndForgotten(t, tn, sub)
}

// BenchmarkQoS2Deliver is Petrel messages delivered at QoS 2 to one paho
// subscriber, each flow to its PUBCOMP, to a clean session and to a
// persistent one, which keeps each delivery's identifier, then its
// PUBREC, in the node's store before the packet goes (the connection
// gated until each commits):
//
//	go test -run XXX -bench BenchmarkQoS2Deliver ./internal/mqttgw/
func BenchmarkQoS2Deliver(b *testing.B) {
	bySession(b, func(b *testing.B, expiry uint32) {
		tn := openNode(b, baseConfig(b))
		got := make(chan struct{}, 1024)
		c, _ := pahoClient(b, tn, &paho.Connect{ClientID: "bench", CleanStart: true, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(expiry)}},
			paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) {
				got <- struct{}{}
				return true, nil
			}}})
		subscribe(b, c, "t/#", 2)
		tn.subscribed(1)
		p := tn.Producer()
		ctx := context.Background()
		b.ResetTimer()
		// Senders enough that each Send's wait for its commit does
		// not pace the deliveries.
		const senders = 32
		for i := range senders {
			go func() {
				for range b.N/senders + min(1, max(0, b.N%senders-i)) {
					if err := p.Send(ctx, p.CreateDataMessage("t.b")); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		for range b.N {
			select {
			case <-got:
			case <-time.After(petreltest.Patience):
				b.Fatal("delivery stopped")
			}
		}
		b.StopTimer()
		petreltest.Eventually(b, "all completed", func() bool { return tn.Subscriptions()[0].Depth == 0 })
	})
}

// A QoS 2 delivery's identifier is kept in the node's store before its
// PUBLISH goes: after a node restart, one whose PUBREC never came goes
// again under the same identifier, with DUP, and a client that had it
// (its PUBREC lost with the connection) knows it for the same message.
func TestResendPublishAcrossRestart(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	sub := subscribedSession(t, tn, "unacked")
	publishAll(t, tn, rawPub{"t/done", 2}, rawPub{"t/sent", 2})

	// t/done completes; t/sent, under the second identifier, does not: a
	// new connection's first delivery would take the first.
	done := sub.Until(packets.PUBLISH, 0).PacketID()
	id := sub.Until(packets.PUBLISH, 0).PacketID()
	sub.Write(&packets.Pubrec{PacketID: done})
	sub.Until(packets.PUBREL, done)
	sub.Write(&packets.Pubcomp{PacketID: done})
	petreltest.Eventually(t, "t/done completed", func() bool { return tn.Status().MQTT.Acked == 1 })
	sub.Close()
	tn.restart()

	sub = resumeSession(t, tn, "unacked")
	p, ok := sub.Until(packets.PUBLISH, 0).Content.(*packets.Publish)
	if !ok || p.PacketID != id || !p.Duplicate || p.Topic != "t/sent" {
		t.Fatalf("after the restart: %+v, want t/sent again under %d with DUP", p, id)
	}
	sub.Write(&packets.Pubrec{PacketID: id})
	sub.Until(packets.PUBREL, id)
	sub.Write(&packets.Pubcomp{PacketID: id})
	completedAndForgotten(t, tn, sub)
}

// subscribedSession connects client id with a new persistent session,
// subscribed to t/# at QoS 2.
func subscribedSession(t *testing.T, tn *testNode, id string) *mqttraw.Conn {
	t.Helper()
	sub, _ := dialSession(t, tn, id, true)
	sub.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/#", QoS: 2}}})
	sub.Until(packets.SUBACK, 1)
	tn.subscribed(1)
	return sub
}

// rawPub is a publish of publishAll: its topic (and payload) and QoS.
type rawPub struct {
	topic string
	qos   byte
}

// publishAll publishes each of ps in turn from a clean session, each to
// the end of its flow (PUBACK, or PUBCOMP).
func publishAll(t *testing.T, tn *testNode, ps ...rawPub) {
	t.Helper()
	pub := mqttraw.Dial(t, tn.MQTTAddr())
	defer pub.Close()
	pub.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "pub", CleanStart: true, KeepAlive: 60})
	for i, p := range ps {
		id := uint16(i + 1)
		pub.Write(&packets.Publish{Topic: p.topic, QoS: p.qos, PacketID: id, Payload: []byte(p.topic)})
		if p.qos == 1 {
			pub.Until(packets.PUBACK, id)
			continue
		}
		pub.Until(packets.PUBREC, id)
		pub.Write(&packets.Pubrel{PacketID: id})
		pub.Until(packets.PUBCOMP, id)
	}
}

// completedAndForgotten waits until the delivery sub completed is acked,
// and checks that nothing of it is kept for a restart.
func completedAndForgotten(t *testing.T, tn *testNode, sub *mqttraw.Conn) {
	t.Helper()
	petreltest.Eventually(t, "completed", func() bool {
		return tn.Status().MQTT.Acked == 1 && tn.Subscriptions()[0].Depth == 0
	})
	sub.Close()
	tn.restart()
	if n := tn.Status().MQTT.ResendNoted; n != 0 {
		t.Fatalf("%d noted after the PUBCOMP and a restart, want 0", n)
	}
}
