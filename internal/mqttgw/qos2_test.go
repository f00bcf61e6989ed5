package mqttgw_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// dialSession connects an MQTT 5 client driven packet by packet, with a
// session expiry of an hour, and returns it with its CONNACK.
func dialSession(t *testing.T, tn *testNode, id string, clean bool) (*mqttraw.Conn, *packets.Connack) {
	t.Helper()
	return mqttraw.Session(t, tn.MQTTAddr(), id, clean)
}

// resumeSession connects client id, resuming its session, which must be
// present.
func resumeSession(t *testing.T, tn *testNode, id string) *mqttraw.Conn {
	t.Helper()
	c, ca := dialSession(t, tn, id, false)
	if !ca.SessionPresent {
		t.Fatalf("session %q not present", id)
	}
	return c
}

// The PUBRECs of a persistent session's QoS 2 publishes awaiting PUBREL
// survive a restart (each PUBLISH sent again is not stored again, each
// PUBREL is answered with success), and are bounded by the Receive
// Maximum the node announces: past it, across the restart that reset the
// connection's own quota, the client is disconnected with 0x93 and
// nothing of its publish is stored; counted in
// petrel_mqtt_refused_total{reason="qos2_pending"}.
func TestQoS2PendingBound(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.MaxInflight = 1 // Receive Maximum 10
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	ctx := context.Background()
	tn.durable("t.#", "all")

	rc, _ := dialSession(t, tn, "burst", true)
	for id := uint16(1); id <= 10; id++ {
		rc.Write(&packets.Publish{Topic: "t/b", QoS: 2, PacketID: id, Payload: []byte{byte(id)}})
		if p := rc.Until(packets.PUBREC, id); p.Content.(*packets.Pubrec).ReasonCode != 0 {
			t.Fatalf("PUBREC %d: %v", id, p)
		}
	}
	if n := tn.Status().MQTT.QoS2Pending; n != 10 {
		t.Fatalf("%d pending, want 10", n)
	}
	rc.Close()
	tn.restart()
	if n := tn.Status().MQTT.QoS2Pending; n != 10 {
		t.Fatalf("after restart: %d pending, want 10", n)
	}

	rc = resumeSession(t, tn, "burst")
	rc.Write(&packets.Publish{Topic: "t/b", QoS: 2, PacketID: 3, Duplicate: true, Payload: []byte{3}})
	if p := rc.Until(packets.PUBREC, 3); p.Content.(*packets.Pubrec).ReasonCode != 0 {
		t.Fatalf("PUBREC of a PUBLISH sent again: %v", p)
	}
	rc.Write(&packets.Publish{Topic: "t/b", QoS: 2, PacketID: 11, Payload: []byte{11}})
	if p := rc.Until(packets.DISCONNECT, 0); p.Content.(*packets.Disconnect).ReasonCode != 0x93 {
		t.Fatalf("past the receive maximum: %v, want DISCONNECT 0x93", p)
	}
	if st := tn.Status().MQTT; st.RefusedQoS2 != 1 || st.QoS2Pending != 10 {
		t.Fatalf("stats %+v", st)
	}
	m := metricsText(t, tn)
	for _, want := range []string{`petrel_mqtt_refused_total{reason="qos2_pending"} 1`, "petrel_mqtt_qos2_pending 10"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	rc, _ = dialSession(t, tn, "burst", false)
	for id := uint16(1); id <= 10; id++ {
		rc.Write(&packets.Pubrel{PacketID: id})
		if p := rc.Until(packets.PUBCOMP, id); p.Content.(*packets.Pubcomp).ReasonCode != 0 {
			t.Fatalf("PUBCOMP %d: %v", id, p)
		}
	}
	rc.Write(&packets.Publish{Topic: "t/b", QoS: 2, PacketID: 11, Payload: []byte{11}})
	rc.Until(packets.PUBREC, 11)
	rc.Write(&packets.Pubrel{PacketID: 11})
	rc.Until(packets.PUBCOMP, 11)
	if n := tn.Status().MQTT.QoS2Pending; n != 0 {
		t.Fatalf("%d pending after the PUBRELs, want 0", n)
	}
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 11 {
		t.Fatalf("stored %d, want 11: each publish once", d)
	}
}

// BenchmarkQoS2Publish is one client's QoS 2 publishes to a durable
// subscription, each awaited to its PUBCOMP, from a clean session and
// from a persistent one, whose marker commits with the message and goes
// at the PUBREL (one more commit):
//
//	go test -run XXX -bench BenchmarkQoS2Publish ./internal/mqttgw/
func BenchmarkQoS2Publish(b *testing.B) {
	bySession(b, func(b *testing.B, expiry uint32) {
		tn := openNode(b, baseConfig(b))
		// Stored: a publish that no subscription matches is not.
		tn.durable("t.#", "all")
		c, _ := pahoClient(b, tn, &paho.Connect{ClientID: "bench", CleanStart: true, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(expiry)}}, paho.ClientConfig{})
		b.ResetTimer()
		for range b.N {
			if _, err := publish(c, &paho.Publish{Topic: "t/b", QoS: 2, Payload: []byte("x")}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A marker whose removal a crash undid is stale: a new QoS 2 PUBLISH
// (DUP 0) under its identifier is a new message, stored, not taken for
// the released one; a PUBLISH sent again (DUP 1) still is. The markers
// are planted in mqtt.db, where earlier versions kept them: they are
// moved to the node's store at start, but for that of a session that no
// longer exists, which is dropped. A key of the store that is no marker
// (a damaged store) is dropped too, and the node starts.
func TestQoS2StaleMarker(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	ctx := context.Background()
	tn.durable("t.#", "all")
	rc, _ := dialSession(t, tn, "stale", true)
	rc.Close()
	if err := tn.Close(); err != nil {
		t.Fatal(err)
	}
	// As a power loss leaves it: the marker of 5, released before.
	db, err := sql.Open("sqlite3", filepath.Join(tn.cfg.DataDir, "mqtt.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO qos2 (client_id, packet_id, created) VALUES ('stale', 5, 0), ('stale', 6, 0), ('gone', 9, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = sql.Open("sqlite3", filepath.Join(tn.cfg.DataDir, "petrel.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO meta (key, value) VALUES ('mqtt/qos2/zz/7', x''), ('mqtt/qos2/73/0', x'')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	tn.open()
	if n := tn.Status().MQTT.QoS2Pending; n != 2 {
		t.Fatalf("%d pending, want 2", n)
	}
	rc, _ = dialSession(t, tn, "stale", false)
	rc.Write(&packets.Publish{Topic: "t/s", QoS: 2, PacketID: 5, Payload: []byte("new")})
	rc.Until(packets.PUBREC, 5)
	rc.Write(&packets.Pubrel{PacketID: 5})
	if p := rc.Until(packets.PUBCOMP, 5); p.Content.(*packets.Pubcomp).ReasonCode != 0 {
		t.Fatalf("PUBCOMP 5: %v", p)
	}
	rc.Write(&packets.Publish{Topic: "t/s", QoS: 2, PacketID: 6, Duplicate: true, Payload: []byte("again")})
	rc.Until(packets.PUBREC, 6)
	rc.Write(&packets.Pubrel{PacketID: 6})
	rc.Until(packets.PUBCOMP, 6)
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 1 {
		t.Fatalf("stored %d, want the new 5 only", d)
	}
	if n := tn.Status().MQTT.QoS2Pending; n != 0 {
		t.Fatalf("%d pending, want 0", n)
	}
	// Nothing comes back: not the legacy rows, not the released markers,
	// not the keys that were no markers.
	tn.restart()
	if n := tn.Status().MQTT.QoS2Pending; n != 0 {
		t.Fatalf("after a restart: %d pending, want 0", n)
	}
	if err := tn.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = sql.Open("sqlite3", filepath.Join(tn.cfg.DataDir, "petrel.db")); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM meta WHERE key LIKE 'mqtt/%'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d marks left in the store (%v), want none", left, err)
	}
	tn.open()
}

// A clean start discards the old session's QoS 2 markers, all of them
// and durably: none counts or comes back after a restart, and the
// publishes they marked are stored once.
func TestQoS2CleanStartDropsMarkers(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	tn.durable("t.#", "all")
	rc, _ := dialSession(t, tn, "again", true)
	for id := uint16(1); id <= 5; id++ {
		rc.Write(&packets.Publish{Topic: "t/c", QoS: 2, PacketID: id, Payload: []byte{byte(id)}})
		rc.Until(packets.PUBREC, id)
	}
	rc.Close()
	if n := tn.Status().MQTT.QoS2Pending; n != 5 {
		t.Fatalf("%d pending, want 5", n)
	}
	rc, _ = dialSession(t, tn, "again", true)
	rc.Close()
	// The session is replaced once the CONNACK went.
	petreltest.Eventually(t, "no QoS 2 marker after a clean start", func() bool { return tn.Status().MQTT.QoS2Pending == 0 },
		func() string { return fmt.Sprint(tn.Status().MQTT.QoS2Pending, " pending") })
	tn.restart()
	if n := tn.Status().MQTT.QoS2Pending; n != 0 {
		t.Fatalf("after a restart: %d pending, want 0", n)
	}
	if d := tn.depth("all"); d != 5 {
		t.Fatalf("stored %d, want 5", d)
	}
}

// A QoS 2 publish's PUBREC waits for its commit on the connection's
// acker, while its PUBREC entry is set at once. When the commit fails (the
// store is full), the PUBREC says so (0x97) and the entry goes: a new
// publish under the same identifier is taken, not answered as a duplicate
// of a message the node never stored. A PUBLISH sent again (DUP) while
// that commit is pending waits for it, and is not answered with success
// by the entry of a message that then fails to commit.
func TestQoS2PubrecAfterAFailedCommit(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Store.MaxMessages = 2
	tn := openNode(t, cfg)
	tn.durable("t.#", "all")
	rc, _ := dialSession(t, tn, "full", true)
	for id := uint16(1); id <= 2; id++ {
		rc.Write(&packets.Publish{Topic: "t/f", QoS: 1, PacketID: id, Payload: []byte{byte(id)}})
		rc.Until(packets.PUBACK, id)
	}
	// The store is full. A PUBLISH, and the same again with DUP in the
	// same write: both are refused, neither answered with success.
	var b bytes.Buffer
	(&packets.Publish{Topic: "t/f", QoS: 2, PacketID: 7, Payload: []byte("x")}).WriteTo(&b)
	(&packets.Publish{Topic: "t/f", QoS: 2, PacketID: 7, Duplicate: true, Payload: []byte("x")}).WriteTo(&b)
	if _, err := rc.Conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if p := rc.Until(packets.PUBREC, 7).Content.(*packets.Pubrec); p.ReasonCode != 0x97 {
			t.Fatalf("PUBREC of a publish the full store refused: 0x%02x, want 0x97", p.ReasonCode)
		}
	}
	// Room again: a new publish under identifier 7 is stored.
	d, err := tn.Subscribe(context.Background(), "t.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m, err := d.Receive(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, "room", func() bool { return tn.depth("all") == 0 })
	rc.Write(&packets.Publish{Topic: "t/f", QoS: 2, PacketID: 7, Payload: []byte("y")})
	if p := rc.Until(packets.PUBREC, 7).Content.(*packets.Pubrec); p.ReasonCode != 0 {
		t.Fatalf("PUBREC of the new publish under 7: 0x%02x, want success", p.ReasonCode)
	}
	rc.Write(&packets.Pubrel{PacketID: 7})
	rc.Until(packets.PUBCOMP, 7)
	m, err := d.Receive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != "y" {
		t.Fatalf("stored %q, want the new publish", m.Body)
	}
}

// bySession runs f as a sub-benchmark for a clean session (expiry 0) and
// for a persistent one.
func bySession(b *testing.B, f func(b *testing.B, expiry uint32)) {
	b.Run("clean", func(b *testing.B) { f(b, 0) })
	b.Run("persistent", func(b *testing.B) { f(b, 3600) })
}

// A client that sends more unacknowledged QoS 2 publishes than the
// Receive Maximum within one connection is disconnected with 0x93 by
// mochi's own quota: counted in petrel_mqtt_refused_total
// {reason="receive_maximum"}. Before, nothing counted or logged it, and
// the only reason documented for 0x93, qos2_pending, stayed 0.
func TestReceiveMaximumWithinConnectionCounted(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.MaxInflight = 1 // Receive Maximum 10
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	rc, _ := dialSession(t, tn, "flood", false)
	for id := uint16(1); id <= 10; id++ {
		rc.Write(&packets.Publish{Topic: "t/f", QoS: 2, PacketID: id, Payload: []byte{byte(id)}})
		rc.Until(packets.PUBREC, id)
	}
	rc.Write(&packets.Publish{Topic: "t/f", QoS: 2, PacketID: 11, Payload: []byte{11}})
	if p := rc.Until(packets.DISCONNECT, 0); p.Content.(*packets.Disconnect).ReasonCode != 0x93 {
		t.Fatalf("past the receive maximum: %v, want DISCONNECT 0x93", p)
	}
	petreltest.Eventually(t, "the refusal counted", func() bool { return tn.Status().MQTT.RefusedReceiveMaximum == 1 })
	if st := tn.Status().MQTT; st.RefusedQoS2 != 0 {
		t.Fatalf("counted as qos2_pending too: %+v", st)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="receive_maximum"} 1`) {
		t.Fatal(`/metrics lacks petrel_mqtt_refused_total{reason="receive_maximum"} 1`)
	}
}
