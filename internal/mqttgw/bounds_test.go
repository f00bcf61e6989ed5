package mqttgw_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// tryConnect connects an MQTT 5 client and returns it, or nil and the
// CONNACK reason code that refused it.
func tryConnect(t *testing.T, tn *testNode, cp *paho.Connect) (*paho.Client, byte) {
	t.Helper()
	conn, err := net.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		if ca == nil {
			t.Fatalf("connect %s: %v, no CONNACK", cp.ClientID, err)
		}
		<-c.Done()
		return nil, ca.ReasonCode
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	return c, 0
}

// metricsText returns the node's /metrics text.
func metricsText(t *testing.T, tn *testNode) string {
	t.Helper()
	resp, err := http.Get("http://" + tn.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// With max_clients 3 the fourth client is refused with 0x97 (an MQTT
// 3.1.1 one with server unavailable), the three keep working, and a
// slot freed takes a new client.
func TestMaxClients(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MQTT.MaxClients = 3
	tn := openNode(t, cfg)
	var cs []*paho.Client
	for i := range 3 {
		c, code := tryConnect(t, tn, &paho.Connect{ClientID: fmt.Sprintf("c%d", i), CleanStart: true})
		if c == nil {
			t.Fatalf("client %d refused with %#x", i, code)
		}
		cs = append(cs, c)
	}
	if c, code := tryConnect(t, tn, &paho.Connect{ClientID: "c3", CleanStart: true}); c != nil || code != 0x97 {
		t.Fatalf("fourth client: connected %v, code %#x, want refused with 0x97", c != nil, code)
	}
	out, err := mosquitto(t, "mosquitto_pub", "-h", "127.0.0.1", "-p", tn.port(), "-V", "mqttv311", "-i", "old", "-t", "t/x", "-m", "x")
	if err == nil || !strings.Contains(out, "unavailable") {
		t.Fatalf("MQTT 3.1.1 client past the bound: %v %s", err, out)
	}
	// The three connected clients still publish.
	for _, c := range cs {
		if _, err := publish(c, &paho.Publish{Topic: "t/x", QoS: 1, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if st := tn.Status().MQTT; st.Clients != 3 || st.RefusedClients != 2 {
		t.Fatalf("clients %d refused %d, want 3 and 2", st.Clients, st.RefusedClients)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="clients"} 2`) {
		t.Fatalf("metric missing:\n%s", m)
	}
	_ = cs[0].Disconnect(&paho.Disconnect{})
	<-cs[0].Done()
	// mochi counts the client gone once its connection ends.
	petreltest.Eventually(t, "a freed slot takes a new client", func() bool {
		c, _ := tryConnect(t, tn, &paho.Connect{ClientID: "c4", CleanStart: true})
		return c != nil
	})
}
