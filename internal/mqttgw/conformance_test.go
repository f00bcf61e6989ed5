package mqttgw_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// Cases written from the MQTT 5 specification; the README lists the
// statements they cover.

func dialRaw(t testing.TB, tn *testNode, id string, keepAlive uint16) *mqttraw.Conn {
	t.Helper()
	rc := mqttraw.Dial(t, tn.MQTTAddr())
	rc.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: id, CleanStart: true, KeepAlive: keepAlive})
	return rc
}

// MQTT-3.1.2-22: a client silent for one and a half keep-alive periods is
// disconnected; MQTT-3.12.4-1: PINGREQ is answered with PINGRESP and
// keeps it connected.
func TestConformanceKeepAlive(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	live := dialRaw(t, tn, "pinger", 1)
	for range 4 {
		live.Write(&packets.Pingreq{})
		if p := live.Read(); p.Type != packets.PINGRESP {
			t.Fatalf("got %v, want PINGRESP", p)
		}
		time.Sleep(500 * time.Millisecond)
	}
	silent := dialRaw(t, tn, "silent", 1)
	_ = silent.SetReadDeadline(time.Now().Add(petreltest.Patience))
	if _, err := packets.ReadPacket(silent.Conn); err == nil {
		t.Fatal("a silent client got a packet, not a closed connection")
	}
}

// MQTT-3.1.4-3: a second connection with a client id takes the session
// over, and the first is disconnected (0x8E Session taken over).
func TestConformanceClientIDTakeover(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	gone := make(chan byte, 1)
	first, _ := pahoClient(t, tn, &paho.Connect{ClientID: "dup", CleanStart: true},
		paho.ClientConfig{OnServerDisconnect: func(d *paho.Disconnect) { gone <- d.ReasonCode }})
	r := newReceived()
	second, _ := pahoClient(t, tn, &paho.Connect{ClientID: "dup", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	select {
	case code := <-gone:
		if code != 0x8E {
			t.Fatalf("first disconnected with 0x%02x, want 0x8E", code)
		}
	case <-time.After(petreltest.Patience):
		t.Fatal("first connection not disconnected")
	}
	<-first.Done()
	subscribe(t, second, "t/#", 1)
	if _, err := publish(second, &paho.Publish{Topic: "t/x", QoS: 1, Payload: []byte("still here")}); err != nil {
		t.Fatal(err)
	}
	if p := r.next(t); string(p.Payload) != "still here" {
		t.Fatalf("got %q", p.Payload)
	}
	if st := tn.Status().MQTT; st.Clients != 1 {
		t.Fatalf("clients %d, want 1", st.Clients)
	}
}

// An empty client id: MQTT 3.1.1 takes it only with clean session 1, and
// answers it with clean session 0 with CONNACK 0x02 identifier rejected
// (MQTT-3.1.3-8), as Mosquitto does; mochi answered 0x80, which 3.1.1
// does not define. MQTT 5 takes it either way and assigns the client an
// id (MQTT-3.1.3-6/-7).
func TestConformanceEmptyClientID(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	for _, tc := range []struct {
		flags byte
		want  []byte
	}{{0x00, []byte{0x20, 0x02, 0x00, 0x02}}, {0x02, []byte{0x20, 0x02, 0x00, 0x00}}} {
		c := mqttraw.Dial(t, tn.MQTTAddr())
		// CONNECT, MQTT 3.1.1: protocol name, level 4, the flags,
		// keep-alive 60, an empty client id.
		connect := []byte{0x10, 0x0C, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, tc.flags, 0x00, 0x3C, 0x00, 0x00}
		if _, err := c.Conn.Write(connect); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(petreltest.Patience))
		got := make([]byte, 4)
		if _, err := io.ReadFull(c.Conn, got); err != nil || !bytes.Equal(got, tc.want) {
			t.Fatalf("MQTT 3.1.1, empty client id, flags 0x%02x: CONNACK % x (%v), want % x", tc.flags, got, err, tc.want)
		}
	}
	expiry := uint32(60)
	c := mqttraw.Dial(t, tn.MQTTAddr())
	ca := c.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, KeepAlive: 60,
		Properties: &packets.Properties{SessionExpiryInterval: &expiry}})
	if ca.Properties == nil || ca.Properties.AssignedClientID == "" {
		t.Fatalf("MQTT 5, empty client id, clean start 0: %+v, want an assigned client id", ca)
	}
}

// MQTT-4.3.3: QoS 2 is exactly once. A PUBLISH sent again with DUP before
// PUBREL is answered with PUBREC and not stored again (MQTT-4.3.3-10);
// PUBREL is answered with PUBCOMP (MQTT-4.3.3-11); the subscriber's QoS 2
// flow (PUBREC, PUBREL, PUBCOMP) completes and its lease is acked once.
func TestConformanceQoS2ExactlyOnce(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	ctx := context.Background()
	tn.durable("t.#", "once")
	r := newReceived()
	sub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "sub2", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "t/#", 2)

	rc := dialRaw(t, tn, "pub2", 60)
	pub := &packets.Publish{Topic: "t/q2", QoS: 2, PacketID: 7, Payload: []byte("exactly once")}
	rc.Write(pub)
	if p := rc.Read(); p.Type != packets.PUBREC || p.Content.(*packets.Pubrec).PacketID != 7 {
		t.Fatalf("got %v, want PUBREC 7", p)
	}
	pub.Duplicate = true
	rc.Write(pub)
	if p := rc.Read(); p.Type != packets.PUBREC || p.Content.(*packets.Pubrec).PacketID != 7 {
		t.Fatalf("got %v, want PUBREC 7 again", p)
	}
	rc.Write(&packets.Pubrel{PacketID: 7})
	if p := rc.Read(); p.Type != packets.PUBCOMP || p.Content.(*packets.Pubcomp).PacketID != 7 {
		t.Fatalf("got %v, want PUBCOMP 7", p)
	}
	got := r.next(t)
	if got.QoS != 2 || string(got.Payload) != "exactly once" {
		t.Fatalf("subscriber got %+v", got)
	}
	r.none(t, 300*time.Millisecond)
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("once"); d != 1 {
		t.Fatalf("durable subscription holds %d, want 1", d)
	}
	petreltest.Eventually(t, "PUBCOMP acks the delivery", func() bool { return tn.Status().MQTT.Acked == 1 })
}

// MQTT-4.7.1: '#' must be last and alone in its level, '+' alone in its
// level (0x8F Topic Filter invalid, MQTT-4.7.3); and filters outside the
// topic spaces, or on the broker's '$' topics, are not authorized here.
func TestConformanceTopicFilters(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "filters", CleanStart: true}, paho.ClientConfig{})
	for _, tc := range []struct {
		filter string
		code   byte
	}{
		{"sensors/#", 1}, {"sensors/+/x", 1}, {"+/x", 0x87}, {"sensors/#/x", 0x8F}, {"sensors/a+", 0x8F},
		{"sensors/a#", 0x8F}, {"orders/#", 0x87}, {"#", 0x87}, {"$SYS/#", 1},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sa, _ := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: tc.filter, QoS: 1}}})
		cancel()
		if sa == nil || len(sa.Reasons) != 1 || sa.Reasons[0] != tc.code {
			t.Errorf("subscribe %q: %+v, want 0x%02x", tc.filter, sa, tc.code)
		}
	}
}

// Many clients publishing QoS 1 at once share the store's group commits:
// each PUBACK waits for its commit, and one commit carries many.
func TestGroupCommitAcrossClients(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	tn.durable("sensors.#", "gc")
	const clients, each = 50, 20
	cs := make([]*paho.Client, clients)
	for i := range cs {
		cs[i], _ = pahoClient(t, tn, &paho.Connect{ClientID: fmt.Sprintf("gc-%d", i), CleanStart: true}, paho.ClientConfig{})
	}
	before := tn.Store().WriterStats()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := publish(c, &paho.Publish{Topic: fmt.Sprintf("sensors/%d", i), QoS: 1, Payload: []byte(fmt.Sprint(j))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := tn.Store().WriterStats()
	commits := after.Commits - before.Commits
	if d := tn.depth("gc"); d != clients*each {
		t.Fatalf("stored %d, want %d: every PUBACK follows a commit", d, clients*each)
	}
	t.Logf("%d QoS 1 publishes from %d clients took %d commits (%.1f per commit)", clients*each, clients, commits, float64(clients*each)/float64(commits))
	if commits >= clients*each {
		t.Fatalf("%d commits for %d publishes: no group commit", commits, clients*each)
	}
}
