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

	petrel "github.com/petrelmq/petrel"
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

// With max_retained 2 a retained publish to a third topic is refused
// with 0x97 and nothing of it is stored, neither in the node nor as a
// retained message; replacing a topic's retained message is taken, and
// deleting one frees a slot. A restart keeps the bound: the store's
// retained messages count.
func TestMaxRetained(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MQTT.MaxRetained = 2
	tn := openNode(t, cfg)
	ctx := context.Background()
	pc, err := tn.Subscribe(ctx, "t.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "retainer", CleanStart: true}, paho.ClientConfig{})
	pub := func(topic, payload string, want byte) {
		t.Helper()
		pr, err := publish(c, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: []byte(payload)})
		if pr == nil || pr.ReasonCode != want {
			t.Fatalf("retained %s %q: %+v %v, want reason %#x", topic, payload, pr, err, want)
		}
	}
	pub("t/a", "1", 0)
	pub("t/b", "1", 0)
	pub("t/c", "1", 0x97)
	pub("t/a", "2", 0) // replacing
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 3 {
		t.Fatalf("node holds %d publishes, want 3: the refused one is not stored", d)
	}
	if st := tn.Status().MQTT; st.Retained != 2 || st.RefusedRetained != 1 {
		t.Fatalf("retained %d refused %d, want 2 and 1", st.Retained, st.RefusedRetained)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="retained"} 1`) {
		t.Fatalf("metric missing:\n%s", m)
	}
	pub("t/b", "", 0) // deleting frees a slot
	pub("t/c", "1", 0)
	pc.Close()
	tn.restart()
	c, _ = pahoClient(t, tn, &paho.Connect{ClientID: "retainer", CleanStart: true}, paho.ClientConfig{})
	pub("t/d", "1", 0x97)
	r := newReceived()
	s, _ := pahoClient(t, tn, &paho.Connect{ClientID: "reader", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, s, "t/#", 1)
	got := map[string]string{}
	for range 2 {
		p := r.next(t)
		got[p.Topic] = string(p.Payload)
	}
	r.none(t, 200*time.Millisecond)
	if got["t/a"] != "2" || got["t/c"] != "1" {
		t.Fatalf("retained after restart: %v, want t/a=2 t/c=1", got)
	}
}

// TestPahoRetainedBytesBound: with max_retained_bytes 10 KiB, retained
// publishes of 4 KiB fit twice; a third, to a new topic, is refused with
// 0x97 and not stored, and so is a replacement that grows past the bound,
// while a smaller one and a deletion are taken. The gauge follows, and a
// restart counts what it loads.
func TestPahoRetainedBytesBound(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MQTT.MaxRetainedBytes = 10 << 10
	tn := openNode(t, cfg)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "retainer", CleanStart: true}, paho.ClientConfig{})
	pub := func(topic string, size int, want byte) {
		t.Helper()
		pr, err := publish(c, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: make([]byte, size)})
		if pr == nil || pr.ReasonCode != want {
			t.Fatalf("retained %s of %d B: %+v %v, want reason %#x", topic, size, pr, err, want)
		}
	}
	wantBytes := func(want int64) {
		t.Helper()
		if st := tn.Status().MQTT; st.RetainedBytes != want {
			t.Fatalf("retained bytes %d, want %d", st.RetainedBytes, want)
		}
		if m := metricsText(t, tn); !strings.Contains(m, fmt.Sprintf("petrel_mqtt_retained_bytes %d\n", want)) {
			t.Fatalf("petrel_mqtt_retained_bytes is not %d:\n%s", want, m)
		}
	}
	pub("t/a", 4096, 0)
	pub("t/b", 4096, 0)
	wantBytes(2 * (4096 + 3))
	pub("t/c", 4096, 0x97) // a new topic past the bound
	pub("t/a", 7000, 0x97) // a replacement that grows past it
	pub("t/a", 1000, 0)    // one that shrinks
	wantBytes(1003 + 4099)
	pub("t/c", 4096, 0)
	pub("t/b", 0, 0) // deleting
	wantBytes(1003 + 4099)
	if st := tn.Status().MQTT; st.RefusedRetained != 2 || st.Retained != 2 {
		t.Fatalf("retained %d refused %d, want 2 and 2", st.Retained, st.RefusedRetained)
	}
	tn.restart()
	wantBytes(1003 + 4099)
	c, _ = pahoClient(t, tn, &paho.Connect{ClientID: "retainer", CleanStart: true}, paho.ClientConfig{})
	pub("t/d", 6000, 0x97)
}

// With max_sessions 2, two persistent sessions are kept after their
// clients left; a third client id asking for one is refused with 0x97
// (an MQTT 3.1.1 one, clean session false, with server unavailable),
// while a clean session and the resumption of a kept one are taken.
func TestMaxSessions(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MQTT.MaxSessions = 2
	tn := openNode(t, cfg)
	hour := uint32(3600)
	keep := func(id string) *paho.Connect {
		return &paho.Connect{ClientID: id, Properties: &paho.ConnectProperties{SessionExpiryInterval: &hour}}
	}
	for _, id := range []string{"p1", "p2"} {
		c, code := tryConnect(t, tn, keep(id))
		if c == nil {
			t.Fatalf("%s refused with %#x", id, code)
		}
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	}
	petreltest.Eventually(t, "both clients gone", func() bool { return tn.Status().MQTT.Clients == 0 })
	if c, code := tryConnect(t, tn, keep("p3")); c != nil || code != 0x97 {
		t.Fatalf("third session: connected %v, code %#x, want refused with 0x97", c != nil, code)
	}
	out, err := mosquitto(t, "mosquitto_pub", "-h", "127.0.0.1", "-p", tn.port(), "-V", "mqttv311", "-c", "-i", "p4", "-q", "1", "-t", "t/x", "-m", "x")
	if err == nil || !strings.Contains(out, "unavailable") {
		t.Fatalf("MQTT 3.1.1 persistent session past the bound: %v %s", err, out)
	}
	if c, code := tryConnect(t, tn, &paho.Connect{ClientID: "p5", CleanStart: true}); c == nil {
		t.Fatalf("clean session refused with %#x", code)
	}
	c, code := tryConnect(t, tn, keep("p1"))
	if c == nil {
		t.Fatalf("resuming p1 refused with %#x", code)
	}
	if st := tn.Status().MQTT; st.Persistent != 2 || st.RefusedSessions != 2 {
		t.Fatalf("persistent %d refused %d, want 2 and 2", st.Persistent, st.RefusedSessions)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="sessions"} 2`) {
		t.Fatalf("metric missing:\n%s", m)
	}
}

// max_session_expiry caps a session's expiry: an MQTT 5 client asking
// for "never" (0xFFFFFFFF) is told the cap in CONNACK, and its session,
// and an MQTT 3.1.1 one (clean session false), end once it passed.
func TestMaxSessionExpiry(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.MaxSessionExpiry = time.Second
	tn := openNode(t, cfg)
	never := uint32(0xFFFFFFFF)
	conn, err := net.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: "forever", Properties: &paho.ConnectProperties{SessionExpiryInterval: &never}})
	if err != nil {
		t.Fatal(err)
	}
	if ca.Properties == nil || ca.Properties.SessionExpiryInterval == nil || *ca.Properties.SessionExpiryInterval != 1 {
		t.Fatalf("CONNACK properties %+v, want session expiry 1", ca.Properties)
	}
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	if out, err := mosquitto(t, "mosquitto_pub", "-h", "127.0.0.1", "-p", tn.port(), "-V", "mqttv311", "-c", "-i", "old", "-q", "1", "-t", "t/x", "-m", "x"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// It left a persistent session (it ends no sooner than a second after
	// its client left).
	kept := false
	for _, si := range tn.Status().MQTT.List {
		kept = kept || si.ClientID == "old" && si.Persistent
	}
	if !kept {
		t.Fatal("the MQTT 3.1.1 client left no persistent session")
	}
	petreltest.Eventually(t, "both sessions expired", func() bool {
		st := tn.Status().MQTT
		return st.Clients == 0 && st.Persistent == 0
	})
}

// With max_subscriptions 2 a client's third topic filter is refused
// with 0x97 (MQTT 3.1.1: 0x80) and nothing of it is made: no Petrel
// subscription, no delivery. Subscribing again to a filter it holds is
// taken, and an unsubscribe frees a slot. Other clients have their own.
func TestMaxSubscriptions(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MQTT.MaxSubscriptions = 2
	tn := openNode(t, cfg)
	r := newReceived()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "many", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	sub := func(want []byte, filters ...string) {
		t.Helper()
		if got := subscribeCodes(t, c, filters...); string(got) != string(want) {
			t.Fatalf("subscribe %v: reasons % x, want % x", filters, got, want)
		}
	}
	sub([]byte{1, 1}, "t/1", "t/2")
	subs := tn.Status().MQTT.Subscriptions
	sub([]byte{1, 0x97}, "t/2", "t/3")
	if st := tn.Status().MQTT; st.Subscriptions != subs || st.RefusedSubscriptions != 1 {
		t.Fatalf("subscriptions %d (before %d), refused %d; want unchanged and 1", st.Subscriptions, subs, st.RefusedSubscriptions)
	}
	if m := metricsText(t, tn); !strings.Contains(m, `petrel_mqtt_refused_total{reason="subscriptions"} 1`) {
		t.Fatalf("metric missing:\n%s", m)
	}
	p, _ := pahoClient(t, tn, &paho.Connect{ClientID: "pub", CleanStart: true}, paho.ClientConfig{})
	if _, err := publish(p, &paho.Publish{Topic: "t/3", QoS: 1, Payload: []byte("refused filter")}); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(p, &paho.Publish{Topic: "t/1", QoS: 1, Payload: []byte("held filter")}); err != nil {
		t.Fatal(err)
	}
	if got := r.next(t); got.Topic != "t/1" {
		t.Fatalf("got %s %q, want t/1 only", got.Topic, got.Payload)
	}
	r.none(t, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{"t/1"}}); err != nil {
		t.Fatal(err)
	}
	sub([]byte{1}, "t/3")
	// An MQTT 3.1.1 client has its own two; its third is refused with 0x80.
	out, _ := mosquitto(t, "mosquitto_sub", "-d", "-h", "127.0.0.1", "-p", tn.port(), "-V", "mqttv311", "-i", "old",
		"-t", "t/b1", "-t", "t/b2", "-t", "t/b3", "-W", "1")
	if !strings.Contains(out, "Subscribed (mid: 1): 1, 1, 128") && !strings.Contains(out, "Subscribed (mid: 1): 0, 0, 128") {
		t.Fatalf("MQTT 3.1.1 subscribe past the bound:\n%s", out)
	}
}
