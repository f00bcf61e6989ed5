package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// TestMQTTQoS2DeliveryKilledAnywhere: a persistent QoS 2 subscriber
// receives messages while its node process is SIGKILLed at random
// moments, again and again. The subscriber is a receiver as MQTT 5 has
// it (4.3.3, method B): it hands a message on as its PUBLISH arrives,
// answers PUBREC, and until the PUBREL it takes a PUBLISH under the same
// identifier for the same message; a PUBREL it does not know gets its
// PUBCOMP. Every message is handed on exactly once, wherever the kills
// land: before the PUBLISH's key committed, between the PUBLISH and the
// PUBREC, between the PUBREL and the PUBCOMP, or after it. Before the
// node kept each QoS 2 delivery's identifier in its store, a PUBLISH in
// flight at a kill went again under a new identifier, and was handed on
// twice.
//
// By default the node is killed 15 times; PETREL_LONG=1 kills it 100
// times:
//
//	PETREL_LONG=1 go test -run TestMQTTQoS2DeliveryKilledAnywhere -v ./cmd/petrel
func TestMQTTQoS2DeliveryKilledAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill test runs without -short")
	}
	kills, messages := 15, 300
	if os.Getenv("PETREL_LONG") == "1" {
		kills, messages = 100, 2000
	}
	n := startQoS2Node(t, 2)
	pub, _ := mqttraw.Session(t, n.addr, "pub-many", true)
	for i := range messages {
		id := uint16(i%60_000 + 1)
		pub.Write(&packets.Publish{Topic: "t/many", QoS: 2, PacketID: id, Payload: []byte("d-" + strconv.Itoa(i))})
		if code := ackCode(pub, packets.PUBREC, id); code != 0 {
			t.Fatalf("PUBREC %d: reason 0x%02x", id, code)
		}
		pub.Write(&packets.Pubrel{PacketID: id})
		if code := ackCode(pub, packets.PUBCOMP, id); code != 0 {
			t.Fatalf("PUBCOMP %d: reason 0x%02x", id, code)
		}
	}
	pub.Close()

	rng := seededRand(t)
	r := &methodB{handed: map[string]int{}, awaiting: map[uint16]bool{}}
	for round := 0; round <= kills; round++ {
		last := round == kills
		conn, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		var timer *time.Timer
		fired := make(chan struct{})
		if !last {
			d := time.Duration(rng.IntN(60_000)) * time.Microsecond
			proc := n.p
			timer = time.AfterFunc(d, func() { proc.Kill(); close(fired) })
		}
		err = r.session(conn, last, messages)
		conn.Close()
		if last {
			if err != nil {
				t.Fatalf("last round: %v (%d of %d messages handed on)", err, len(r.handed), messages)
			}
			break
		}
		<-fired
		timer.Stop()
		n.restart()
	}
	t.Logf("%d messages handed on through %d kills; %d PUBLISHes came again under a known identifier, %d PUBRELs came for a completed flow",
		len(r.handed), kills, r.again, r.unknownRel)
	for i := range messages {
		if k := "d-" + strconv.Itoa(i); r.handed[k] != 1 {
			t.Errorf("%s handed on %d times, want once", k, r.handed[k])
		}
	}
}

// methodB is a QoS 2 receiver that hands a message on as its PUBLISH
// arrives (MQTT 5 4.3.3, method B), with its session state kept across
// connections as a client keeps it.
type methodB struct {
	handed     map[string]int
	awaiting   map[uint16]bool // PUBREC sent, PUBREL not yet come
	again      int             // PUBLISHes under an identifier awaiting its PUBREL
	unknownRel int             // PUBRELs for no flow in progress
}

// session connects as "counter", resuming its session, and receives until
// the connection fails, or, with last, until every one of want messages
// was handed on and no flow is in progress.
func (r *methodB) session(conn net.Conn, last bool, want int) error {
	expiry := uint32(3600)
	if _, err := (&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "counter", KeepAlive: 60,
		Properties: &packets.Properties{SessionExpiryInterval: &expiry}}).WriteTo(conn); err != nil {
		return err
	}
	for {
		if last && len(r.handed) == want && len(r.awaiting) == 0 {
			return nil
		}
		_ = conn.SetReadDeadline(time.Now().Add(petreltest.Patience))
		p, err := packets.ReadPacket(conn)
		if err != nil {
			return err
		}
		// A receiver that takes its time, so that the kills land with
		// flows in progress.
		time.Sleep(time.Millisecond)
		switch c := p.Content.(type) {
		case *packets.Connack:
			if c.ReasonCode != 0 || !c.SessionPresent {
				return fmt.Errorf("connack: %v", p)
			}
		case *packets.Publish:
			if c.QoS != 2 {
				return fmt.Errorf("a delivery at QoS %d", c.QoS)
			}
			if r.awaiting[c.PacketID] {
				r.again++ // the same message: not handed on again
			} else {
				r.handed[string(c.Payload)]++
				r.awaiting[c.PacketID] = true
			}
			_, err = (&packets.Pubrec{PacketID: c.PacketID}).WriteTo(conn)
		case *packets.Pubrel:
			if !r.awaiting[c.PacketID] {
				r.unknownRel++
			}
			delete(r.awaiting, c.PacketID)
			_, err = (&packets.Pubcomp{PacketID: c.PacketID}).WriteTo(conn)
		case *packets.Disconnect:
			return errors.New("disconnected by the node")
		}
		if err != nil {
			return err
		}
	}
}
