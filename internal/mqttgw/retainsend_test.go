package mqttgw_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// TestRetainedPastTheQueueOfWrites: 4,000 retained messages of 2 KB,
// QoS 1 and 0 in turn, match both filters of one SUBSCRIBE (t/a/+ at
// QoS 0, t/# at QoS 1), from a client with a 4 KB receive buffer that
// reads nothing until some of them found its queue of writes full (64
// places here, mochi's 8,192 by default). Once it reads, it gets every
// message twice, once per filter, each at the QoS of its filter, with
// RETAIN set and no DUP, and acknowledges the QoS 1 ones: nothing stays
// in flight, and the figures count those resent. What waits for a client
// that goes first goes with it. Before, mochi dropped
// what did not fit in the queue, QoS 1 included, without a word: 9,590
// of 9,990 reached a subscriber that paused for half a second.
func TestRetainedPastTheQueueOfWrites(t *testing.T) {
	defer mqttgw.SetClientWritesPending(64)()
	const n = 4000
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	payload := bytes.Repeat([]byte("r"), 2048)
	qosOf := func(i int) byte { return byte(1 - i%2) }

	pub, _ := mqttraw.Session(t, tn.MQTTAddr(), "pub", true)
	defer pub.Close()
	for i := 0; i < n; i += 100 {
		acks := 0
		for j := i; j < i+100; j++ {
			p := &packets.Publish{Topic: fmt.Sprintf("t/a/%d", j), QoS: qosOf(j), Retain: true, Payload: payload}
			if p.QoS > 0 {
				p.PacketID = uint16(j%100 + 1)
				acks++
			}
			pub.Write(p)
		}
		for range acks {
			pub.Until(packets.PUBACK, 0)
		}
	}
	petreltest.Eventually(t, "retained messages stored", func() bool { return tn.Status().MQTT.Retained == n })

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sub := mqttraw.New(t, conn)
	sub.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "slow", CleanStart: true, KeepAlive: 60})
	// The QoS 0 filter first: mochi walks the filters in order, and takes
	// a packet identifier for a QoS 1 message under the lock its writer
	// holds while the socket is full, so that a QoS 1 message waits
	// there, and drops none, until the client reads.
	sub.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/a/+", QoS: 0}, {Topic: "t/#", QoS: 1}}})
	petreltest.Eventually(t, "retained messages waiting for the client", func() bool { return tn.Status().MQTT.RetainedWaiting > 0 })

	got := map[string][]byte{}
	for count := 0; count < 2*n; {
		_ = conn.SetReadDeadline(time.Now().Add(petreltest.Patience))
		cp, err := packets.ReadPacket(conn)
		if err != nil {
			st := tn.Status().MQTT
			t.Fatalf("after %d of %d: %v (waiting %d, resent %d, dropped %d, sys dropped %d, in flight %d)",
				count, 2*n, err, st.RetainedWaiting, st.RetainedResent, st.RetainedDropped, st.SysDropped, st.Inflight)
		}
		p, ok := cp.Content.(*packets.Publish)
		if !ok {
			continue // the SUBACK
		}
		count++
		if !p.Retain || p.Duplicate || !bytes.Equal(p.Payload, payload) {
			t.Fatalf("%s: retain %v dup %v, %d bytes", p.Topic, p.Retain, p.Duplicate, len(p.Payload))
		}
		got[p.Topic] = append(got[p.Topic], p.QoS)
		if p.QoS > 0 {
			sub.Write(&packets.Puback{PacketID: p.PacketID})
		}
	}
	for i := range n {
		topic := fmt.Sprintf("t/a/%d", i)
		qos := got[topic]
		slices.Sort(qos)
		if want := []byte{0, qosOf(i)}; !slices.Equal(qos, want) {
			t.Fatalf("%s: received at QoS %v, want %v", topic, qos, want)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if p, err := packets.ReadPacket(conn); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after all: %v %v", p, err)
	}
	petreltest.Eventually(t, "nothing in flight", func() bool { return tn.Status().MQTT.Inflight == 0 })
	st := tn.Status().MQTT
	t.Logf("%d of %d resent", st.RetainedResent, 2*n)
	if st.RetainedResent == 0 || st.RetainedWaiting != 0 || st.RetainedDropped != 0 {
		t.Fatalf("resent %d, waiting %d, dropped %d", st.RetainedResent, st.RetainedWaiting, st.RetainedDropped)
	}

	// A client that goes before it read them: what waits for it goes
	// with its connection, and the sender with it (goleak at the end).
	gone, err := d.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	graw := mqttraw.New(t, gone)
	graw.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "gone", CleanStart: true, KeepAlive: 60})
	graw.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/a/+", QoS: 0}, {Topic: "t/#", QoS: 1}}})
	petreltest.Eventually(t, "retained messages waiting for the client that goes", func() bool { return tn.Status().MQTT.RetainedWaiting > 0 })
	gone.Close()
	petreltest.Eventually(t, "nothing waiting once it went", func() bool {
		st := tn.Status().MQTT
		return st.RetainedWaiting == 0 && st.Clients == 2
	})

	st = tn.Status().MQTT
	m := metricsText(t, tn)
	for _, want := range []string{
		fmt.Sprintf("petrel_mqtt_retained_resent_total %d\n", st.RetainedResent),
		"petrel_mqtt_retained_waiting 0\n",
		"petrel_mqtt_dropped_total{reason=\"retained\"} 0\n",
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	// Across the node, at most the node's bound wait (10 here): past it a
	// message is lost, counted.
	defer mqttgw.SetRetainedWaitingNodeBound(10)()
	capped, err := d.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	craw := mqttraw.New(t, capped)
	craw.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "capped", CleanStart: true, KeepAlive: 60})
	craw.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/a/+", QoS: 0}, {Topic: "t/#", QoS: 1}}})
	petreltest.Eventually(t, "retained messages dropped past the node's bound", func() bool { return tn.Status().MQTT.RetainedDropped > 0 })
	if st := tn.Status().MQTT; st.RetainedWaiting > 10 {
		t.Fatalf("%d waiting, past the node's bound of 10", st.RetainedWaiting)
	}
	if m := metricsText(t, tn); strings.Contains(m, "petrel_mqtt_dropped_total{reason=\"retained\"} 0\n") {
		t.Fatal("the drops past the node's bound are not in petrel_mqtt_dropped_total")
	}
	capped.Close()
	petreltest.Eventually(t, "nothing waiting once the capped client went", func() bool { return tn.Status().MQTT.RetainedWaiting == 0 })
}
