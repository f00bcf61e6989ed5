package mqttgw_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// The broker's $SYS topics, as Mosquitto publishes them, are served to
// mosquitto_sub: retained at once on subscribe, then every sys_interval.
// $SYS/broker/version names Petrel, clients/connected counts the clients,
// and messages/inflight comes back to 0 once QoS 1 deliveries are acked:
// mochi takes one off that figure at each PUBACK, and deliveries it did
// not count in made it drift below zero.
func TestMosquittoSysTopics(t *testing.T) {
	needMosquitto(t)
	cfg := baseConfig(t)
	cfg.MQTT.SysInterval = time.Second
	tn := openNode(t, cfg)

	// A publish to a '$' topic is refused: MQTT 3.1.1 has no failure to
	// acknowledge it with, so the connection goes (MQTT-3.3.5-2);
	// mochi's own drop left the publisher waiting for its PUBACK.
	start := time.Now()
	if out, err := mosquitto(t, "mosquitto_pub", "-p", tn.port(), "-V", "mqttv311", "-q", "1", "-t", "$SYS/broker/version", "-m", "forged"); err == nil {
		t.Fatalf("mosquitto_pub to $SYS succeeded: %s", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("mosquitto_pub to $SYS waited %s for its PUBACK", d)
	}
	s := startSub(t, "-p", tn.port(), "-t", "$SYS/broker/version", "-C", "1", "-W", "30")
	if got := strings.TrimSpace(s.wait(t)); !strings.HasPrefix(got, "petrel ") || strings.Contains(got, "forged") {
		t.Fatalf("$SYS/broker/version: %q, want petrel's", got)
	}

	r := newReceived()
	sub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "sub", CleanStart: true}, paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "sensors/#", 1)
	pub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "pub", CleanStart: true}, paho.ClientConfig{})
	for i := range 20 {
		if _, err := publish(pub, &paho.Publish{Topic: "sensors/x", QoS: 1, Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		r.next(t)
	}
	petreltest.Eventually(t, "deliveries acked", func() bool { return tn.Status().MQTT.Acked == 20 })

	// After the next tick: three clients (sub, pub and this one).
	want := map[string]string{"$SYS/broker/clients/connected": "3", "$SYS/broker/messages/inflight": "0"}
	petreltest.Eventually(t, "$SYS figures", func() bool {
		s := startSub(t, "-p", tn.port(), "-t", "$SYS/broker/clients/connected", "-t", "$SYS/broker/messages/inflight", "-v", "-C", "4", "-W", "30")
		got := map[string]string{}
		for _, l := range lines(s.wait(t)) { // the retained pair, then the next tick's
			topic, v, _ := strings.Cut(l, " ")
			got[topic] = v
		}
		for k, v := range want {
			if got[k] != v {
				t.Logf("%s = %q, want %q", k, got[k], v)
				return false
			}
		}
		return true
	})
}

// The $SYS topics describe the whole broker: with access rules, a client
// reads them only if its identity may subscribe to every topic ('#').
// They are read-only: a publish to one is refused.
func TestSysTopicsAccess(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Peers = []petrel.PeerConfig{
		{Name: "app", Secret: "s3cret-app-1", Kind: petrel.PeerKindClient},
		{Name: "ops", Secret: "s3cret-ops-1", Kind: petrel.PeerKindClient},
	}
	cfg.Access = []petrel.AccessRule{
		{Identity: "app", Publish: []string{"sensors.#"}, Subscribe: []string{"sensors.#"}},
		{Identity: "ops", Subscribe: []string{"#"}},
	}
	tn := openNode(t, cfg)
	for _, tc := range []struct {
		user, pass string
		code       byte
	}{{"app", "s3cret-app-1", 0x87}, {"ops", "s3cret-ops-1", 0}} {
		r := newReceived()
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: tc.user, CleanStart: true, Username: tc.user, UsernameFlag: true, Password: []byte(tc.pass), PasswordFlag: true},
			paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sa, _ := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$SYS/#", QoS: 0}}})
		cancel()
		if sa == nil || len(sa.Reasons) != 1 || sa.Reasons[0] != tc.code {
			t.Fatalf("%s subscribing $SYS/#: %+v, want 0x%02x", tc.user, sa, tc.code)
		}
		if tc.code == 0 {
			if p := r.next(t); !strings.HasPrefix(p.Topic, "$SYS/broker/") {
				t.Fatalf("%s got %q", tc.user, p.Topic)
			}
		}
		if pr, _ := publish(c, &paho.Publish{Topic: "$SYS/broker/version", QoS: 1, Payload: []byte("forged")}); pr == nil || pr.ReasonCode != 0x90 {
			t.Fatalf("%s publishing to $SYS: %+v, want PUBACK 0x90", tc.user, pr)
		}
	}
}

// sys_interval past its range is refused at open, naming the key.
func TestSysIntervalChecked(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 25 * time.Hour} {
		cfg := baseConfig(t)
		cfg.MQTT.SysInterval = d
		n, err := petrel.Open(context.Background(), cfg)
		if err == nil {
			n.Close()
			t.Fatalf("sys_interval %s taken", d)
		}
		if !strings.Contains(err.Error(), "mqtt.sys_interval") {
			t.Fatalf("sys_interval %s: %v, want the key named", d, err)
		}
	}
}

// $SYS filters count toward max_subscriptions as the others do: each is
// an entry of the broker's index, so a client cannot add them without
// bound. One the client holds already is taken again, and one it drops
// makes room.
func TestSysFiltersBounded(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.MaxSubscriptions = 2
	tn := openNode(t, cfg)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "many", CleanStart: true}, paho.ClientConfig{})
	code := func(filter string) byte {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sa, _ := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 0}}})
		if sa == nil || len(sa.Reasons) != 1 {
			t.Fatalf("subscribe %q: %+v", filter, sa)
		}
		return sa.Reasons[0]
	}
	for _, tc := range []struct {
		filter string
		want   byte
	}{{"$SYS/broker/a", 0}, {"$SYS/broker/b", 0}, {"$SYS/broker/c", 0x97}, {"$SYS/broker/a", 0}, {"sensors/x", 0x97}} {
		if got := code(tc.filter); got != tc.want {
			t.Fatalf("subscribe %q: 0x%02x, want 0x%02x", tc.filter, got, tc.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{"$SYS/broker/a"}}); err != nil {
		t.Fatal(err)
	}
	if got := code("sensors/x"); got != 0 {
		t.Fatalf("subscribe sensors/x once a $SYS filter went: 0x%02x, want 0", got)
	}
}

// A client that publishes what is refused, again and again, gets each
// refusal, and the log one line a minute for it: it cannot flood the log.
func TestRefusedPublishesLogOnce(t *testing.T) {
	cfg := baseConfig(t)
	var logs petreltest.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tn := openNode(t, cfg)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "noisy", CleanStart: true}, paho.ClientConfig{})
	for range 5 {
		if pr, _ := publish(c, &paho.Publish{Topic: "$SYS/x", QoS: 1, Payload: []byte("x")}); pr == nil || pr.ReasonCode != 0x90 {
			t.Fatalf("publish to $SYS/x: %+v, want PUBACK 0x90", pr)
		}
	}
	if n := strings.Count(logs.String(), "mqtt publish refused"); n != 1 {
		t.Fatalf("%d log lines for 5 refusals, want 1:\n%s", n, logs.String())
	}
	if n := tn.Status().MQTT.Refused; n != 5 {
		t.Fatalf("%d refusals counted, want 5", n)
	}
}

// A publish to any '$' topic is answered once, with 0x90, and counted
// once. mochi drops only $SYS topics itself; the others reach the publish
// hook, which refused them a second time: a client that took the packet
// identifier back after the first PUBACK or PUBREC read the second as the
// answer to its next publish, a valid one.
func TestDollarPublishAnsweredOnce(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	c := mqttraw.Dial(t, tn.MQTTAddr())
	c.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "dollar", CleanStart: true, KeepAlive: 60})
	// ack reads the next packet, which must be the answer to id.
	ack := func(typ byte, id uint16) byte {
		t.Helper()
		p := c.Read()
		if p.Type != typ || p.PacketID() != id {
			t.Fatalf("got %v, want type %d for %d", p, typ, id)
		}
		switch a := p.Content.(type) {
		case *packets.Puback:
			return a.ReasonCode
		case *packets.Pubrec:
			return a.ReasonCode
		case *packets.Pubcomp:
			return a.ReasonCode
		}
		return 0xFF
	}
	id := uint16(7)
	for _, topic := range []string{"$x/y", "$share/g/a", "$SYS/broker/version", "$sys/x"} {
		for _, qos := range []byte{1, 2} {
			typ := packets.PUBACK
			if qos == 2 {
				typ = packets.PUBREC
			}
			before := tn.Status().MQTT.Refused
			c.Write(&packets.Publish{Topic: topic, QoS: qos, PacketID: id, Payload: []byte("refused")})
			if code := ack(typ, id); code != 0x90 {
				t.Fatalf("publish to %s at QoS %d: 0x%02x, want 0x90", topic, qos, code)
			}
			// The identifier is free again: a valid publish takes it.
			c.Write(&packets.Publish{Topic: "t/ok", QoS: qos, PacketID: id, Payload: []byte("valid")})
			if code := ack(typ, id); code != 0 {
				t.Fatalf("publish to t/ok at QoS %d after %s, under the same identifier: 0x%02x, want 0", qos, topic, code)
			}
			if qos == 2 {
				c.Write(&packets.Pubrel{PacketID: id})
				if code := ack(packets.PUBCOMP, id); code != 0 {
					t.Fatalf("PUBCOMP 0x%02x", code)
				}
			}
			if n := tn.Status().MQTT.Refused - before; n != 1 {
				t.Fatalf("publish to %s at QoS %d counted %d refusals, want 1", topic, qos, n)
			}
		}
	}
}

// $SYS/broker/retained counts the retained messages the node keeps, as
// petrel_mqtt_retained does, across a restart too. They are kept by the
// node, not by mochi, whose figure stayed 0.
func TestSysRetainedCount(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.SysInterval = time.Second
	tn := openNode(t, cfg)
	pub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "pub", CleanStart: true}, paho.ClientConfig{})
	retain := func(topic, payload string) {
		t.Helper()
		if _, err := publish(pub, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	retain("sensors/a", "1")
	retain("sensors/b", "2")
	r := newReceived()
	sub, _ := pahoClient(t, tn, &paho.Connect{ClientID: "sys", CleanStart: true}, paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "$SYS/broker/retained", 0)
	// figure waits for the figure want: the retained one on subscribing
	// may be the last tick's, from before the change.
	figure := func(want string) {
		t.Helper()
		deadline := time.Now().Add(petreltest.Patience)
		var got string
		for time.Now().Before(deadline) {
			if got = string(r.next(t).Payload); got == want {
				return
			}
		}
		t.Fatalf("$SYS/broker/retained %q, want %q", got, want)
	}
	figure("2")
	if n := tn.Status().MQTT.Retained; n != 2 {
		t.Fatalf("petrel_mqtt_retained %d, want 2", n)
	}
	retain("sensors/a", "") // an empty retained payload deletes it
	figure("1")

	// After a restart, those loaded from the store, in the figures
	// published at start: with an interval of an hour, the ones there are.
	tn.cfg.MQTT.SysInterval = time.Hour
	tn.restart()
	r = newReceived()
	sub, _ = pahoClient(t, tn, &paho.Connect{ClientID: "sys-again", CleanStart: true}, paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, sub, "$SYS/broker/retained", 0)
	if got := string(r.next(t).Payload); got != "1" {
		t.Fatalf("$SYS/broker/retained after a restart %q, want 1", got)
	}
}
