package mqttgw_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// closedWithin reports whether the server closes c within d, with c
// having sent nothing more.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 64))
	ne, ok := err.(net.Error)
	return err != nil && !(ok && ne.Timeout())
}

// Connections that have not sent their CONNECT are bounded three ways,
// each counted: in time (closed after the connect timeout), in number
// (past the bound a new one is closed at once) and in the bytes their
// CONNECTs claim (a fixed header claiming more than is left is closed
// before mochi allocates the packet). A client that connects properly
// still does once the idle ones are gone.
func TestConnectionsAwaitingConnectBounded(t *testing.T) {
	defer mqttgw.SetConnectBounds(5*time.Second, 4, 1<<20)()
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	dial := func() net.Conn {
		t.Helper()
		c, err := netDial(tn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// In number: four wait, the fifth is closed at once.
	var idle []net.Conn
	for range 4 {
		idle = append(idle, dial())
	}
	petreltest.Eventually(t, "four awaiting CONNECT", func() bool { return tn.Status().MQTT.Connecting == 4 })
	if extra := dial(); !closedWithin(extra, 2*time.Second) {
		t.Fatal("a fifth connection awaiting CONNECT was kept")
	}
	if st := tn.Status().MQTT; st.RefusedConnecting != 1 || st.Connecting != 4 {
		t.Fatalf("refused %d, connecting %d; want 1 and 4", st.RefusedConnecting, st.Connecting)
	}
	for _, c := range idle {
		c.Close()
	}
	petreltest.Eventually(t, "none awaiting CONNECT", func() bool { return tn.Status().MQTT.Connecting == 0 })

	// In bytes: a CONNECT claiming 2 MiB, past the 1 MiB left.
	big := dial()
	if _, err := big.Write([]byte{0x10, 0x80, 0x80, 0x80, 0x01}); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(big, 2*time.Second) {
		t.Fatal("a CONNECT claiming past the budget was kept")
	}
	if st := tn.Status().MQTT; st.RefusedConnectBytes != 1 {
		t.Fatalf("refused for bytes %d, want 1", st.RefusedConnectBytes)
	}

	// In time: a connection that sends nothing is closed.
	mqttgw.SetConnectBounds(300*time.Millisecond, 4, 1<<20)
	start := time.Now()
	if silent := dial(); !closedWithin(silent, 5*time.Second) {
		t.Fatal("a silent connection was kept")
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the connect timeout", took)
	}
	petreltest.Eventually(t, "timeout counted", func() bool { return tn.Status().MQTT.ConnectTimeouts == 1 })
	// A CONNECT whose header came but whose body trickles: the same.
	slow := dial()
	if _, err := slow.Write([]byte{0x10, 0x20, 0x00}); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(slow, 5*time.Second) {
		t.Fatal("a CONNECT whose body never came was kept")
	}
	petreltest.Eventually(t, "second timeout counted", func() bool { return tn.Status().MQTT.ConnectTimeouts == 2 })

	// A proper client connects, and its keepalive, not the connect
	// timeout, governs it afterwards.
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "fine", CleanStart: true, KeepAlive: 30}, paho.ClientConfig{})
	time.Sleep(600 * time.Millisecond)
	if _, err := publish(c, &paho.Publish{Topic: "sensors/ok", QoS: 1}); err != nil {
		t.Fatalf("publish past the connect timeout: %v", err)
	}

	b := metricsText(t, tn)
	for _, want := range []string{
		"petrel_mqtt_connecting 0", "petrel_mqtt_connect_timeouts_total 2",
		`petrel_mqtt_refused_total{reason="connecting"} 1`, `petrel_mqtt_refused_total{reason="connect_bytes"} 1`,
	} {
		if !strings.Contains(b, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}
