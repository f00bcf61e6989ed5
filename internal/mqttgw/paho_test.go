package mqttgw_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
	"github.com/petrelmq/petrel/message"
)

func ptr[T any](v T) *T { return &v }

func subscribe(t testing.TB, c *paho.Client, filter string, qos byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: qos}}})
	if err != nil {
		t.Fatalf("subscribe %s: %v %+v", filter, err, sa)
	}
}

func publish(c *paho.Client, p *paho.Publish) (*paho.PublishResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Publish(ctx, p)
}

// MQTT 5 properties reach a Petrel consumer as its properties, content
// type, TTL and reply fields, and a Petrel producer's message reaches an
// MQTT 5 subscriber with them.
func TestPahoPropertiesBothWays(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	ctx := context.Background()
	pc, err := tn.Subscribe(ctx, "sensors.#", petrel.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r := newReceived()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "p1", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, c, "sensors/#", 1)

	_, err = publish(c, &paho.Publish{Topic: "sensors/a.b/x", QoS: 1, Payload: []byte(`{"t":21}`), Properties: &paho.PublishProperties{
		ContentType: "application/json", ResponseTopic: "sensors/replies", CorrelationData: []byte{1, 2, 3},
		MessageExpiry: ptr(uint32(600)), PayloadFormat: ptr(byte(1)),
		User: paho.UserProperties{{Key: "site", Value: "plant-7"}, {Key: "unit", Value: "C"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := pc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Ack()
	if d.Destination != "sensors.a_2Eb.x" || string(d.Body) != `{"t":21}` || d.Data.DataType != "application/json" || d.Data.Encoding != "utf-8" {
		t.Fatalf("petrel got %q %q %+v", d.Destination, d.Body, d.Data)
	}
	if d.TTL <= 0 || d.TTL > 600*time.Second {
		t.Fatalf("TTL %v, want (0, 600s]", d.TTL)
	}
	for k, want := range map[string]string{"site": "plant-7", "unit": "C", "mqtt.response_topic": "sensors/replies"} {
		if v, ok := d.Properties.Get(k); !ok || v.Str() != want {
			t.Errorf("property %s = %v, want %q", k, v, want)
		}
	}
	if v, _ := d.Properties.Get("mqtt.correlation_data"); string(v.BytesVal()) != "\x01\x02\x03" {
		t.Errorf("correlation data %v", v)
	}
	// The MQTT subscriber got it too, with its properties.
	got := r.next(t)
	if got.Topic != "sensors/a.b/x" || got.Properties.ContentType != "application/json" || got.Properties.ResponseTopic != "sensors/replies" ||
		string(got.Properties.CorrelationData) != "\x01\x02\x03" || got.Properties.User.Get("site") != "plant-7" {
		t.Fatalf("mqtt got %+v %+v", got, got.Properties)
	}

	// Petrel to MQTT.
	p := tn.Producer()
	m := p.CreateDataMessage("sensors.line_2.temp")
	m.Body = []byte("22.5")
	m.TTL = time.Minute
	m.Data.DataType = "text/plain"
	m.Properties.Set("site", message.String("plant-9"))
	m.Properties.Set("count", message.Int32(7))
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	got = r.next(t)
	if got.Topic != "sensors/line_2/temp" || string(got.Payload) != "22.5" || got.QoS != 1 || got.Properties.ContentType != "text/plain" ||
		got.Properties.User.Get("site") != "plant-9" || got.Properties.User.Get("count") != "7" ||
		got.Properties.MessageExpiry == nil || *got.Properties.MessageExpiry == 0 || *got.Properties.MessageExpiry > 60 {
		t.Fatalf("mqtt got %+v %+v", got, got.Properties)
	}
	// A command's reply fields are the response topic and correlation data.
	cm := p.CreateCommandMessage("sensors.cmd")
	cm.Command.ReplyTo = "sensors.replies.7"
	cm.Command.CorrelationID = "req-1"
	if err := p.Send(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got = r.next(t)
	if got.Properties.ResponseTopic != "sensors/replies/7" || string(got.Properties.CorrelationData) != "req-1" {
		t.Fatalf("command as mqtt: %+v", got.Properties)
	}
	d, err = pc.Receive(ctx) // the Petrel subscription saw them too
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Ack()
}

// A QoS 1 delivery the client does not acknowledge is delivered again,
// with DUP set, when its persistent session reconnects, and again after a
// restart of the node; once acknowledged, never again.
func TestPahoInflightRedelivery(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	connect := func() (*paho.Client, *received) {
		r := newReceived()
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "keeper", CleanStart: false, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}},
			paho.ClientConfig{EnableManualAcknowledgment: true, OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
		return c, r
	}
	c, r := connect()
	subscribe(t, c, "t/#", 1)
	p := tn.Producer()
	for i := range 2 {
		m := p.CreateDataMessage(fmt.Sprintf("t.m%d", i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	first := r.next(t)
	second := r.next(t)
	if first.Duplicate() || second.Duplicate() {
		t.Fatal("first delivery marked DUP")
	}
	if err := c.Ack(first); err != nil { // t/m0 acked, t/m1 not
		t.Fatal(err)
	}
	sub := "mqtt.keeper." // durable subscription name prefix
	petreltest.Eventually(t, "first ack", func() bool {
		for _, s := range tn.Subscriptions() {
			if strings.HasPrefix(s.Name, sub) {
				return s.Depth == 1
			}
		}
		return false
	})
	c.TerminateConnectionForTest()

	c, r = connect()
	again := r.next(t)
	if again.Topic != "t/m1" || !again.Duplicate() {
		t.Fatalf("after reconnect: %s dup=%v", again.Topic, again.Duplicate())
	}
	c.TerminateConnectionForTest()
	tn.restart()
	c, r = connect()
	again = r.next(t)
	if again.Topic != "t/m1" || !again.Duplicate() {
		t.Fatalf("after restart: %s dup=%v", again.Topic, again.Duplicate())
	}
	if err := c.Ack(again); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "acked", func() bool { return tn.Status().MQTT.Acked >= 1 && tn.Subscriptions()[0].Depth == 0 })
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	_, r = connect()
	r.none(t, 300*time.Millisecond)
}

// Publishes the mapping or the node's limits refuse are answered with
// MQTT 5 reason codes, and nothing of them is stored.
func TestPahoRefusedWithReasonCodes(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Limits = message.Limits{MaxBody: 1024, MaxProperties: 8}
	tn := openNode(t, cfg)
	ctx := context.Background()
	pc, err := tn.Subscribe(ctx, "sensors.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "bad", CleanStart: true}, paho.ClientConfig{})
	many := paho.UserProperties{}
	for i := range 20 {
		many = append(many, paho.UserProperty{Key: fmt.Sprintf("k%d", i), Value: "v"})
	}
	for _, tc := range []struct {
		name string
		pub  paho.Publish
		code byte
	}{
		{"oversized payload", paho.Publish{Topic: "sensors/a", QoS: 1, Payload: make([]byte, 2048)}, 0x95},
		{"too many user properties", paho.Publish{Topic: "sensors/a", QoS: 1, Properties: &paho.PublishProperties{User: many}}, 0x83},
		{"repeated user property", paho.Publish{Topic: "sensors/a", QoS: 2, Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "k", Value: "1"}, {Key: "k", Value: "2"}}}}, 0x83},
		{"reserved user property", paho.Publish{Topic: "sensors/a", QoS: 1, Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "mqtt.qos", Value: "0"}}}}, 0x83},
		{"outside topic spaces", paho.Publish{Topic: "orders/a", QoS: 1}, 0x90},
		{"too long once escaped", paho.Publish{Topic: "sensors/" + strings.Repeat(".", 60), QoS: 2}, 0x90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := publish(c, &tc.pub)
			if pr == nil || pr.ReasonCode != tc.code {
				t.Fatalf("response %+v, %v; want reason 0x%02x", pr, err, tc.code)
			}
		})
	}
	if _, err := publish(c, &paho.Publish{Topic: "sensors/ok", QoS: 1, Payload: []byte("fine")}); err != nil {
		t.Fatal(err)
	}
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 1 {
		t.Fatalf("subscription holds %d, want only the accepted publish", d)
	}
	if st := tn.Status().MQTT; st.Refused != 6 || st.Published[1] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// MQTT clients prove identities of the peers section, and the access
// rules' publish and subscribe patterns judge them.
func TestAuthAndAccessRules(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Peers = []petrel.PeerConfig{{Name: "app-1", Secret: "s3cret-app-1", Kind: petrel.PeerKindClient}}
	cfg.Access = []petrel.AccessRule{{Identity: "app-1", Publish: []string{"sensors.a.*"}, Subscribe: []string{"sensors.a.#"}}}
	tn := openNode(t, cfg)
	dial := func(user, pass string) (*paho.Connack, error) {
		conn, err := netDial(tn)
		if err != nil {
			return nil, err
		}
		c := paho.NewClient(paho.ClientConfig{Conn: conn})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ca, err := c.Connect(ctx, &paho.Connect{ClientID: "x", CleanStart: true, Username: user, UsernameFlag: user != "", Password: []byte(pass), PasswordFlag: pass != ""})
		if err == nil {
			_ = c.Disconnect(&paho.Disconnect{})
		}
		<-c.Done()
		return ca, err
	}
	for _, tc := range []struct{ user, pass string }{{"app-1", "wrong"}, {"nobody", "s3cret-app-1"}, {"", ""}} {
		if ca, err := dial(tc.user, tc.pass); err == nil || ca == nil || ca.ReasonCode != 0x86 {
			t.Errorf("%s/%s: connack %+v, %v; want 0x86", tc.user, tc.pass, ca, err)
		}
	}
	if st := tn.Status().MQTT; st.AuthFailed != 3 {
		t.Errorf("auth failures %d, want 3", st.AuthFailed)
	}
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "a1", CleanStart: true, Username: "app-1", UsernameFlag: true, Password: []byte("s3cret-app-1"), PasswordFlag: true}, paho.ClientConfig{})
	if _, err := publish(c, &paho.Publish{Topic: "sensors/a/temp", QoS: 1}); err != nil {
		t.Errorf("allowed publish: %v", err)
	}
	if pr, _ := publish(c, &paho.Publish{Topic: "sensors/b/temp", QoS: 1}); pr == nil || pr.ReasonCode != 0x87 {
		t.Errorf("denied publish: %+v", pr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sa, _ := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "sensors/a/+", QoS: 1}, {Topic: "sensors/#", QoS: 1}}})
	if sa == nil || len(sa.Reasons) != 2 || sa.Reasons[0] != 1 || sa.Reasons[1] != 0x87 {
		t.Errorf("suback %+v, want [1 0x87]", sa)
	}
}

// recorder is an interceptor that notes the MQTT path's events.
type recorder struct {
	petrel.NopInterceptor
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == s {
			return true
		}
	}
	return false
}

func (r *recorder) OnConnect(_ context.Context, c petrel.ConnInfo) error {
	r.add("connect " + c.Path.String() + " " + c.Identity)
	return nil
}

func (r *recorder) OnDisconnect(c petrel.ConnInfo) { r.add("disconnect " + c.Path.String()) }

func (r *recorder) OnPublish(_ context.Context, m *message.Message, c petrel.ConnInfo) error {
	r.add("publish " + c.Path.String() + " " + m.Destination)
	if strings.HasSuffix(m.Destination, ".forbidden") {
		return errors.New("no forbidden topics")
	}
	return nil
}

func (r *recorder) OnSubscribe(_ context.Context, s petrel.SubscribeInfo) error {
	r.add("subscribe " + s.Conn.Path.String())
	return nil
}

func (r *recorder) OnDeliver(_ context.Context, m *message.Message, c petrel.ConnInfo) {
	r.add("deliver " + c.Path.String() + " " + m.Destination)
}

func (r *recorder) OnAck(a petrel.AckInfo) { r.add("ack " + a.Conn.Path.String()) }

// Interceptors see MQTT connections, publishes, subscriptions, deliveries
// and acks, and may refuse a publish.
func TestInterceptorsSeeMQTT(t *testing.T) {
	rec := &recorder{}
	cfg := baseConfig(t)
	cfg.Interceptors = []petrel.Interceptor{rec}
	tn := openNode(t, cfg)
	r := newReceived()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "i1", CleanStart: true, Username: "who", UsernameFlag: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, c, "sensors/#", 1)
	if _, err := publish(c, &paho.Publish{Topic: "sensors/x", QoS: 1, Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	r.next(t)
	if pr, _ := publish(c, &paho.Publish{Topic: "sensors/forbidden", QoS: 1}); pr == nil || pr.ReasonCode != 0x83 {
		t.Fatalf("intercepted publish: %+v", pr)
	}
	petreltest.Eventually(t, "events", func() bool {
		for _, e := range []string{"connect mqtt who", "subscribe mqtt", "publish mqtt sensors.x", "deliver mqtt sensors.x", "ack mqtt"} {
			if !rec.has(e) {
				return false
			}
		}
		return true
	}, func() string { rec.mu.Lock(); defer rec.mu.Unlock(); return strings.Join(rec.events, "; ") })
}

// MQTT-3.1.2-11 (session expiry): an MQTT 5 session ends its expiry
// interval after its connection, and its durable subscriptions with it;
// MQTT-3.1.2-4: a clean start discards a session at once.
func TestPahoSessionExpiry(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "brief", CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(1))}}, paho.ClientConfig{})
	subscribe(t, c, "sensors/#", 1)
	if len(tn.Subscriptions()) != 1 || !tn.Subscriptions()[0].Durable {
		t.Fatalf("subscriptions %+v, want one durable", tn.Subscriptions())
	}
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	petreltest.Eventually(t, "session expired", func() bool {
		return len(tn.Subscriptions()) == 0 && tn.Status().MQTT.Sessions == 0
	})

	c, _ = pahoClient(t, tn, &paho.Connect{ClientID: "long", CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}}, paho.ClientConfig{})
	subscribe(t, c, "sensors/#", 1)
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	tn.restart()
	if len(tn.Subscriptions()) != 1 || tn.Status().MQTT.Persistent != 1 {
		t.Fatalf("after restart: %+v", tn.Subscriptions())
	}
	c, ca := pahoClient(t, tn, &paho.Connect{ClientID: "long", CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}}, paho.ClientConfig{})
	if !ca.SessionPresent { // MQTT-3.2.2-3, from mqtt.db after the restart
		t.Fatal("resumed after a restart: session not present")
	}
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	_, ca = pahoClient(t, tn, &paho.Connect{ClientID: "long", CleanStart: true}, paho.ClientConfig{})
	if ca.SessionPresent {
		t.Fatal("clean start: session present")
	}
	petreltest.Eventually(t, "clean start drops the durable subscription", func() bool { return len(tn.Subscriptions()) == 0 })
}

// A PUBLISH with more user properties than a message may hold is refused
// by their count, before they are read one by one: 50,000 of them, each
// looked up among those before it, were seconds of a core.
func TestPahoManyUserPropertiesRefusedByCount(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "props", CleanStart: true}, paho.ClientConfig{})
	many := make(paho.UserProperties, 50_000)
	for i := range many {
		many[i] = paho.UserProperty{Key: fmt.Sprintf("k%d", i), Value: "v"}
	}
	pr, err := publish(c, &paho.Publish{Topic: "sensors/a", QoS: 1, Properties: &paho.PublishProperties{User: many}})
	if pr == nil || pr.ReasonCode != 0x83 {
		t.Fatalf("response %+v, %v; want 0x83", pr, err)
	}
	if pr.Properties == nil || !strings.Contains(pr.Properties.ReasonString, "50000 user properties exceed limit 64") {
		t.Fatalf("reason %+v, want the count refused before the properties are read", pr.Properties)
	}
	if _, err := publish(c, &paho.Publish{Topic: "sensors/ok", QoS: 1}); err != nil {
		t.Fatalf("the connection after the refusal: %v", err)
	}
}

// Topic aliases are bounded to 10 (mochi's default of 65,535 would let a
// connection keep that many topics of up to 64 KiB), which CONNACK
// announces: an alias within it names its topic, one past it closes the
// connection.
func TestPahoTopicAliasesBounded(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	all := tn.consumer("sensors.#", "all")
	c, ca := pahoClient(t, tn, &paho.Connect{ClientID: "aliases", CleanStart: true}, paho.ClientConfig{})
	if ca.Properties == nil || ca.Properties.TopicAliasMaximum == nil || *ca.Properties.TopicAliasMaximum != 10 {
		t.Fatalf("CONNACK properties %+v, want a topic alias maximum of 10", ca.Properties)
	}
	alias := func(topic string, n uint16) (*paho.PublishResponse, error) {
		return publish(c, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(topic), Properties: &paho.PublishProperties{TopicAlias: &n}})
	}
	if _, err := alias("sensors/aliased", 10); err != nil {
		t.Fatalf("alias 10: %v", err)
	}
	if _, err := alias("", 10); err != nil {
		t.Fatalf("alias 10 without its topic: %v", err)
	}
	for range 2 {
		d := nextDelivery(t, all)
		if d.Destination != "sensors.aliased" {
			t.Fatalf("published to %q, want sensors.aliased", d.Destination)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// paho keeps to the maximum it was told; a raw connection does not.
	raw, _ := mqttraw.Session(t, tn.MQTTAddr(), "past-aliases", true)
	past := uint16(11)
	raw.Write(&packets.Publish{Topic: "sensors/past", QoS: 0, Payload: []byte("x"), Properties: &packets.Properties{TopicAlias: &past}})
	_ = raw.SetReadDeadline(time.Now().Add(petreltest.Patience))
	for {
		if _, err := packets.ReadPacket(raw.Conn); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection outlived an alias past the maximum")
			}
			break // closed by the node (after its DISCONNECT 0x94)
		}
	}
	petreltest.Eventually(t, "the refusal counted", func() bool { return tn.Status().MQTT.RefusedTopicAliases == 1 })
}

// The node's Maximum Packet Size, limits.max_body plus 64 KiB, which mochi
// enforces, is announced in CONNACK (3.2.2.3.6): a packet that keeps to it
// is read (and a publish past max_body refused with 0x95), one past it
// gets DISCONNECT 0x95 (4.13) and its connection closed.
func TestPahoMaximumPacketSizeAnnounced(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Limits = message.Limits{MaxBody: 1024}
	tn := openNode(t, cfg)
	const limit = 1024 + 64<<10
	_, ca := pahoClient(t, tn, &paho.Connect{ClientID: "sized", CleanStart: true}, paho.ClientConfig{})
	if ca.Properties == nil || ca.Properties.MaximumPacketSize == nil || *ca.Properties.MaximumPacketSize != limit {
		t.Fatalf("CONNACK properties %+v, want a maximum packet size of %d", ca.Properties, limit)
	}

	raw, _ := mqttraw.Session(t, tn.MQTTAddr(), "sized-raw", true)
	// sized publishes to sensors/big a QoS 1 PUBLISH of n bytes in all:
	// its fixed header (a byte and a 3-byte remaining length), topic,
	// packet identifier and an empty property length, then the payload.
	sized := func(n int) {
		t.Helper()
		body := append([]byte{0x00, 0x0B}, "sensors/big"...)
		body = append(body, 0x00, 0x01, 0x00)
		body = append(body, make([]byte, n-4-len(body))...)
		r := len(body)
		pk := append([]byte{0x32, byte(r&0x7F | 0x80), byte(r>>7&0x7F | 0x80), byte(r >> 14)}, body...)
		if _, err := raw.Conn.Write(pk); err != nil {
			t.Fatal(err)
		}
	}
	sized(limit)
	p := raw.Until(packets.PUBACK, 1)
	if code := p.Content.(*packets.Puback).ReasonCode; code != 0x95 {
		t.Fatalf("a publish of the maximum packet size: PUBACK 0x%02x, want 0x95 (payload over max_body)", code)
	}
	sized(limit + 16)
	_ = raw.SetReadDeadline(time.Now().Add(petreltest.Patience))
	var last any
	for {
		p, err := packets.ReadPacket(raw.Conn)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection outlived a packet past the maximum")
			}
			break
		}
		last = p.Content
	}
	if d, ok := last.(*packets.Disconnect); !ok || d.ReasonCode != 0x95 {
		t.Fatalf("last packet before the connection closed: %v, want DISCONNECT 0x95", last)
	}
}
