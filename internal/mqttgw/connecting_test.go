package mqttgw_test

import (
	"context"
	"log/slog"
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

// TestConnectingSharePerAddress: one remote address holds at most its
// share of the places of connections awaiting their CONNECT; past it, its
// new connection is closed at once, counted apart, while a client from
// another address still connects. Before, one host that opened
// connections and sent nothing held every place and shut every other
// client out.
func TestConnectingSharePerAddress(t *testing.T) {
	defer mqttgw.SetConnectBounds(5*time.Second, 8, 1<<20)()
	defer mqttgw.SetConnectPerAddress(3)()
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	from := func(ip string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", tn.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var flood []net.Conn
	for range 3 {
		flood = append(flood, from("127.0.0.9"))
	}
	petreltest.Eventually(t, "three awaiting CONNECT", func() bool { return tn.Status().MQTT.Connecting == 3 })
	if extra := from("127.0.0.9"); !closedWithin(extra, 2*time.Second) {
		t.Fatal("a fourth connection from one address awaiting CONNECT was kept")
	}
	// Another address still gets in, past the flooder.
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "other", CleanStart: true}, paho.ClientConfig{})
	if _, err := publish(c, &paho.Publish{Topic: "sensors/ok", QoS: 1}); err != nil {
		t.Fatalf("publish from another address: %v", err)
	}
	st := tn.Status().MQTT
	if st.RefusedConnectingAddress != 1 || st.RefusedConnecting != 0 {
		t.Fatalf("refused for the address %d, for the bound %d; want 1 and 0", st.RefusedConnectingAddress, st.RefusedConnecting)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="connecting_address"} 1`+"\n") {
		t.Errorf("metrics lack the refusal:\n%s", m)
	}
	// A place given back is the address's again.
	flood[0].Close()
	petreltest.Eventually(t, "a place given back", func() bool { return tn.Status().MQTT.Connecting == 2 })
	again := from("127.0.0.9")
	if closedWithin(again, 500*time.Millisecond) {
		t.Fatal("the address's connection was refused with a place free")
	}
	// None left awaiting its CONNECT when the node closes: mochi adds a
	// connection being established to a WaitGroup that its Close waits
	// on, and the race detector sees the two meet.
	for _, c := range append(flood, again) {
		c.Close()
	}
	petreltest.Eventually(t, "none awaiting CONNECT", func() bool { return tn.Status().MQTT.Connecting == 0 })
}

// TestConnectionEndsLogNoWarning: connections that end, before their
// CONNECT or after it, without a DISCONNECT, or refused past a bound, log
// no line at WARN with an empty message. mochi's listener logged one for
// each, so that a flood of idle connections made as many lines, past the
// rate limit of the refusal's own.
func TestConnectionEndsLogNoWarning(t *testing.T) {
	defer mqttgw.SetConnectBounds(5*time.Second, 2, 1<<20)()
	cfg := baseConfig(t)
	logs := &petreltest.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tn := openNode(t, cfg)
	var conns []net.Conn
	for range 5 { // two wait, three are refused past the bound
		c, err := netDial(tn)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	petreltest.Eventually(t, "three refused", func() bool { return tn.Status().MQTT.RefusedConnecting == 3 })
	for _, c := range conns {
		c.Close()
	}
	// Their places are given back once the node sees them closed: a
	// client that came before that would be refused past the bound.
	petreltest.Eventually(t, "the places given back", func() bool { return tn.Status().MQTT.Connecting == 0 })
	// A client that connects and then drops its connection.
	c, err := netDial(tn)
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{Conn: c})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "drops", CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-pc.Done()
	petreltest.Eventually(t, "every connection ended", func() bool {
		st := tn.Status().MQTT
		return st.Connecting == 0 && st.Clients == 0
	})
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, `msg=""`) {
			t.Errorf("a connection's end logged at WARN with no message: %s", l)
		}
	}
	if n := strings.Count(logs.String(), "too many connections awaiting CONNECT"); n != 1 {
		t.Errorf("the refusal logged %d times, want once (rate-limited)", n)
	}
}
