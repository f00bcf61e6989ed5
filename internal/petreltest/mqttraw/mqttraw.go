// Package mqttraw drives an MQTT 5 connection packet by packet, for tests
// that must stop a flow where no client library lets them: between PUBREC
// and PUBREL, silent past the keep-alive, or split across WebSocket frames.
package mqttraw

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// Conn is an MQTT connection driven packet by packet; every failure ends
// the test.
type Conn struct {
	t testing.TB
	net.Conn
}

// New drives conn, which the caller closes.
func New(t testing.TB, conn net.Conn) *Conn { return &Conn{t: t, Conn: conn} }

// Dial opens a TCP connection to addr, closed at the end of the test.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return New(t, conn)
}

// Session dials addr and connects as client id with a session expiry of
// an hour, clean or resumed, and returns the connection with its CONNACK,
// which must be a success.
func Session(t testing.TB, addr, id string, clean bool) (*Conn, *packets.Connack) {
	t.Helper()
	c := Dial(t, addr)
	expiry := uint32(3600)
	return c, c.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: id, CleanStart: clean, KeepAlive: 60,
		Properties: &packets.Properties{SessionExpiryInterval: &expiry}})
}

// Connect sends pk and returns the CONNACK, which must be a success.
func (c *Conn) Connect(pk *packets.Connect) *packets.Connack {
	c.t.Helper()
	c.Write(pk)
	p := c.Read()
	ca, ok := p.Content.(*packets.Connack)
	if !ok || ca.ReasonCode != 0 {
		c.t.Fatalf("connack: %v", p)
	}
	return ca
}

// Write sends one packet.
func (c *Conn) Write(p io.WriterTo) {
	c.t.Helper()
	if _, err := p.WriteTo(c.Conn); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// Read returns the next packet, waiting at most petreltest.Patience.
func (c *Conn) Read() *packets.ControlPacket {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(petreltest.Patience))
	p, err := packets.ReadPacket(c.Conn)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return p
}

// Until reads packets until one of type typ for packet identifier id (or
// any, 0) and returns it: what a resumed session resends first is
// skipped.
func (c *Conn) Until(typ byte, id uint16) *packets.ControlPacket {
	c.t.Helper()
	for range 100 {
		p := c.Read()
		if p.Type == typ && (id == 0 || p.PacketID() == id) {
			return p
		}
		c.t.Logf("skipped %v", p)
	}
	c.t.Fatalf("no packet of type %d for %d", typ, id)
	return nil
}
