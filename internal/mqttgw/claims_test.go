package mqttgw_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// varint is an MQTT remaining length.
func varint(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7F)
		n >>= 7
		if n > 0 {
			c |= 0x80
		}
		b = append(b, c)
		if n == 0 {
			return b
		}
	}
}

// mqttString is a two-byte length, then s.
func mqttString(s string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...)
}

// rawConnect opens a connection, sends a CONNECT (clean, keep-alive 0:
// no deadline from mochi) of MQTT 5 or 3.1.1 and reads its CONNACK.
func rawConnect(t *testing.T, dial func() (net.Conn, error), id string, v5 bool) net.Conn {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := append(mqttString("MQTT"), 4, 0x02, 0, 0)
	if v5 {
		body = append(mqttString("MQTT"), 5, 0x02, 0, 0, 0)
	}
	body = append(body, mqttString(id)...)
	if _, err := c.Write(append(append([]byte{0x10}, varint(len(body))...), body...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c, hdr); err != nil || hdr[0] != 0x20 {
		t.Fatalf("%s: CONNACK %x, %v", id, hdr, err)
	}
	rest := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, rest); err != nil || rest[1] != 0 {
		t.Fatalf("%s: CONNACK %x, %v", id, rest, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// rawPublish is a QoS 0 PUBLISH of payload to topic.
func rawPublish(topic string, payload []byte, v5 bool) []byte {
	body := mqttString(topic)
	if v5 {
		body = append(body, 0) // no properties
	}
	body = append(body, payload...)
	return append(append([]byte{0x30}, varint(len(body))...), body...)
}

// The bytes that large packets of connected clients claim are bounded
// across connections: a fixed header whose claim does not fit is held
// back until others are read whole (MQTT 3.1.1 and 5 alike), one that
// waits too long closes its connection, and so does a claimed packet
// whose body stops coming, keep-alive 0 or not. Each is counted, and a
// gauge shows the bytes claimed.
func TestPacketBytesBounded(t *testing.T) {
	const claim = 200 << 10
	defer mqttgw.SetPacketBounds(300<<10, 64<<10, time.Minute, time.Minute)()
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	dial := func() (net.Conn, error) { return netDial(tn) }
	r := newReceived()
	sub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "sub", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "t/#", 0)
	packetBytes := func() int64 { return tn.Status().MQTT.PacketBytes }

	// a, MQTT 3.1.1, sends all of a large PUBLISH but its last bytes.
	a := rawConnect(t, dial, "a", false)
	pa := rawPublish("t/a", bytes.Repeat([]byte{'a'}, claim), false)
	if _, err := a.Write(pa[:len(pa)-10]); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "a's packet claimed", func() bool { return packetBytes() == int64(len(pa)-4) })

	// c, MQTT 5, claims as much: it does not fit, waits, and past the
	// wait for room its connection is closed, counted.
	mqttgw.SetPacketBounds(300<<10, 64<<10, 300*time.Millisecond, time.Minute)
	c := rawConnect(t, dial, "c", true)
	if _, err := c.Write(rawPublish("t/c", make([]byte, claim), true)[:4]); err != nil { // its fixed header
		t.Fatal(err)
	}
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a packet waiting past the wait for room was kept")
	}
	petreltest.Eventually(t, "refusal counted", func() bool { return tn.Status().MQTT.RefusedPacketBytes == 1 })
	if got := packetBytes(); got != int64(len(pa)-4) {
		t.Fatalf("claimed %d bytes after c's refusal, want a's %d", got, len(pa)-4)
	}

	// b, MQTT 5, claims as much, and waits for as long as a takes.
	mqttgw.SetPacketBounds(300<<10, 64<<10, time.Minute, time.Minute)
	b := rawConnect(t, dial, "b", true)
	pb := rawPublish("t/b", bytes.Repeat([]byte{'b'}, claim), true)
	if _, err := b.Write(pb[:4]); err != nil {
		t.Fatal(err)
	}

	// a's packet comes whole: b's claim fits, and both publishes arrive.
	if _, err := a.Write(pa[len(pa)-10:]); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "b's packet claimed", func() bool { return packetBytes() == int64(len(pb)-4) })
	if _, err := b.Write(pb[4:]); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		p := r.next(t)
		if len(p.Payload) != claim || !bytes.Equal(p.Payload, bytes.Repeat([]byte{p.Topic[2]}, claim)) {
			t.Fatalf("got %s of %d bytes, want %d bytes of %c", p.Topic, len(p.Payload), claim, p.Topic[2])
		}
		got[p.Topic] = true
	}
	if !got["t/a"] || !got["t/b"] {
		t.Fatalf("got %v, want t/a and t/b", got)
	}
	petreltest.Eventually(t, "nothing claimed", func() bool { return packetBytes() == 0 })

	// b's next packet stops coming: closed once the stall passes, its
	// claim given back.
	mqttgw.SetPacketBounds(300<<10, 64<<10, time.Minute, 300*time.Millisecond)
	if _, err := b.Write(pb[:1000]); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(b, 10*time.Second) {
		t.Fatal("a claimed packet whose body stopped coming was kept")
	}
	petreltest.Eventually(t, "stall counted, claim given back", func() bool {
		st := tn.Status().MQTT
		return st.PacketTimeouts == 1 && st.PacketBytes == 0
	})

	m := metricsText(t, tn)
	for _, want := range []string{
		"petrel_mqtt_packet_bytes 0",
		`petrel_mqtt_refused_total{reason="packet_bytes"} 1`, `petrel_mqtt_refused_total{reason="packet_timeout"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// With a budget far below what the clients send at once, paho's large
// publishes of every QoS, over MQTT 5 on TCP and over WebSocket, all
// arrive whole: packets wait their turn, none is refused, and the
// packets under the small bound pass beside them.
func TestPacketBytesBoundedTraffic(t *testing.T) {
	defer mqttgw.SetPacketBounds(100<<10, 16<<10, time.Minute, time.Minute)()
	cfg := baseConfig(t)
	cfg.MQTT.WebSocket = "127.0.0.1:0"
	tn := openNode(t, cfg)
	r := newReceived()
	sub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "sub", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "t/#", 2)

	const each, size = 4, 60 << 10
	var pubs []*paho.Client
	for i := range 3 {
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "tcp" + string(rune('0'+i)), CleanStart: true}, paho.ClientConfig{})
		pubs = append(pubs, c)
	}
	conn, err := dialWS(t, "ws://"+tn.Status().MQTT.WebSocket+"/mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := pahoOver(t, conn, &paho.Connect{ClientID: "ws", CleanStart: true}, paho.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pubs = append(pubs, ws)
	var wg sync.WaitGroup
	errs := make(chan error, len(pubs)*each*2)
	for i, c := range pubs {
		wg.Go(func() {
			for j := range each {
				payload := bytes.Repeat([]byte{byte('a' + i)}, size)
				if j%2 == 1 {
					payload = payload[:100] // small, beside the large
				}
				if _, err := publish(c, &paho.Publish{Topic: "t/x", QoS: byte((i + j) % 3), Payload: payload}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range len(pubs) * each {
		p := r.next(t)
		if n := len(p.Payload); n != size && n != 100 || !bytes.Equal(p.Payload, bytes.Repeat(p.Payload[:1], n)) {
			t.Fatalf("got a payload of %d bytes, altered", n)
		}
	}
	if st := tn.Status().MQTT; st.RefusedPacketBytes != 0 || st.PacketTimeouts != 0 {
		t.Fatalf("refused %d, timed out %d, want none", st.RefusedPacketBytes, st.PacketTimeouts)
	}
	petreltest.Eventually(t, "nothing claimed", func() bool { return tn.Status().MQTT.PacketBytes == 0 })
}
