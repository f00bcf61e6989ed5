package mqttgw_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// willClient connects id with a will to sensors/<id>/status delayed by
// delay seconds, and a session expiry of expiry seconds.
func willClient(t *testing.T, tn *testNode, id string, clean bool, delay, expiry uint32) *paho.Client {
	t.Helper()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 30,
		Properties:     &paho.ConnectProperties{SessionExpiryInterval: ptr(expiry)},
		WillMessage:    &paho.WillMessage{Topic: "sensors/" + id + "/status", Payload: []byte("offline"), QoS: 1},
		WillProperties: &paho.WillProperties{WillDelayInterval: ptr(delay), ContentType: "text/plain", User: paho.UserProperties{{Key: "why", Value: "lost"}}},
	}, paho.ClientConfig{})
	return c
}

// MQTT 5 Will Delay Interval (3.1.3.2): a will waits for its delay, and
// goes with its properties; a new connection to the session within the
// delay discards it (MQTT-3.1.3-9), a takeover too; a clean start, which ends the
// session, and a session that ends with its connection send it at once;
// and one waiting across a restart of the node goes after the restart.
func TestPahoWillDelay(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	r := newReceived()
	watcher, _ := pahoClient(t, tn, &paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, watcher, "sensors/+/status", 1)
	expect := func(id string) *paho.Publish {
		t.Helper()
		p := r.next(t)
		if p.Topic != "sensors/"+id+"/status" || string(p.Payload) != "offline" {
			t.Fatalf("got %s %q, want %s's will", p.Topic, p.Payload, id)
		}
		return p
	}

	// Delayed: nothing at once, the will after its delay, with its
	// properties.
	c := willClient(t, tn, "dev-1", false, 1, 60)
	lost := time.Now()
	c.TerminateConnectionForTest()
	petreltest.Eventually(t, "will kept", func() bool { return tn.Status().MQTT.WillsDelayed == 1 })
	p := expect("dev-1")
	if waited := time.Since(lost); waited < time.Second {
		t.Fatalf("will published %v after the connection was lost, before its 1 s delay", waited)
	}
	if p.Properties.User.Get("why") != "lost" { // paho sends no other will property
		t.Fatalf("will properties %+v", p.Properties)
	}

	// A new connection to the session within the delay discards it.
	c = willClient(t, tn, "dev-2", false, 1, 60)
	c.TerminateConnectionForTest()
	petreltest.Eventually(t, "will kept", func() bool { return tn.Status().MQTT.WillsDelayed == 1 })
	back := willClient(t, tn, "dev-2", false, 1, 60)
	// So does one taking over a connection still open (MQTT-3.1.4-3).
	willClient(t, tn, "dev-6", false, 1, 60)
	taker := willClient(t, tn, "dev-6", false, 1, 60)
	r.none(t, 1500*time.Millisecond)
	_ = back.Disconnect(&paho.Disconnect{}) // discards its will (MQTT-3.1.2-10)
	_ = taker.Disconnect(&paho.Disconnect{})
	if st := tn.Status().MQTT; st.WillsDiscarded != 2 || st.WillsDelayed != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A clean start ends the session: its will goes at once.
	c = willClient(t, tn, "dev-3", false, 3600, 3600)
	c.TerminateConnectionForTest()
	petreltest.Eventually(t, "will kept", func() bool { return tn.Status().MQTT.WillsDelayed == 1 })
	back = willClient(t, tn, "dev-3", true, 0, 0)
	expect("dev-3")
	_ = back.Disconnect(&paho.Disconnect{})

	// A session that ends with its connection sends it at once, whatever
	// the delay.
	c = willClient(t, tn, "dev-4", true, 3600, 0)
	c.TerminateConnectionForTest()
	expect("dev-4")

	// Across a restart: the will waits in mqtt.db and goes after it, once.
	c = willClient(t, tn, "dev-5", false, 2, 60)
	c.TerminateConnectionForTest()
	petreltest.Eventually(t, "will kept", func() bool { return tn.Status().MQTT.WillsDelayed == 1 })
	tn.restart()
	if st := tn.Status().MQTT; st.WillsDelayed != 1 {
		t.Fatalf("after restart: %d wills delayed, want 1", st.WillsDelayed)
	}
	r = newReceived()
	watcher, _ = pahoClient(t, tn, &paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, watcher, "sensors/+/status", 1)
	expect("dev-5")
	r.none(t, 300*time.Millisecond)
	if st := tn.Status().MQTT; st.WillsDelayed != 0 || st.WillsSent != 1 {
		t.Fatalf("after restart: stats %+v", st)
	}
}

// A node restart closes its clients' connections; a client that comes
// back within its will delay has no will published (the delay runs across
// the restart), one that does not has it published after the delay.
func TestPahoWillDelayAcrossRestart(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	willClient(t, tn, "back", false, 2, 60)
	willClient(t, tn, "gone", false, 2, 60)
	tn.restart()
	if st := tn.Status().MQTT; st.WillsDelayed != 2 {
		t.Fatalf("after restart: %d wills delayed, want 2", st.WillsDelayed)
	}
	r := newReceived()
	watcher, _ := pahoClient(t, tn, &paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, watcher, "sensors/+/status", 1)
	willClient(t, tn, "back", false, 2, 60)
	p := r.next(t)
	if p.Topic != "sensors/gone/status" {
		t.Fatalf("got %s, want gone's will only", p.Topic)
	}
	r.none(t, 500*time.Millisecond)
	if st := tn.Status().MQTT; st.WillsSent != 1 || st.WillsDiscarded != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// mosquitto_sub's will, delayed by -D will will-delay-interval, goes
// after the delay with its content type and user property when the
// client is killed.
func TestMosquittoWillDelay(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	r := newReceived()
	watcher, _ := pahoClient(t, tn, &paho.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	subscribe(t, watcher, "sensors/+/status", 1)
	dying := startSub(t, "-p", tn.port(), "-V", "mqttv5", "-i", "dev-m", "-c", "-x", "60", "-t", "t/nothing",
		"--will-topic", "sensors/dev-m/status", "--will-payload", "offline", "--will-qos", "1",
		"-D", "will", "will-delay-interval", "1", "-D", "will", "content-type", "text/plain",
		"-D", "will", "user-property", "why", "killed")
	tn.subscribed(2)
	_ = dying.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	p := r.next(t)
	if waited := time.Since(killed); waited < time.Second {
		t.Fatalf("will after %v, before its 1 s delay", waited)
	}
	if p.Topic != "sensors/dev-m/status" || string(p.Payload) != "offline" || p.Properties.ContentType != "text/plain" ||
		p.Properties.User.Get("why") != "killed" {
		t.Fatalf("will %s %q %+v", p.Topic, p.Payload, p.Properties)
	}
}
