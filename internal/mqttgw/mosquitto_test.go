package mqttgw_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/petrelmq/petrel/internal/petreltest"
)

func needMosquitto(t *testing.T) {
	if _, err := exec.LookPath("mosquitto_pub"); err != nil {
		t.Skip("mosquitto_pub not installed (apt-get install mosquitto-clients)")
	}
}

func pub(t *testing.T, tn *testNode, args ...string) {
	t.Helper()
	out, err := mosquitto(t, "mosquitto_pub", append([]string{"-p", tn.port()}, args...)...)
	if err != nil {
		t.Fatalf("mosquitto_pub %v: %v\n%s", args, err, out)
	}
}

// QoS 0, 1 and 2 publishes reach a mosquitto_sub, over MQTT 3.1.1 and 5.
func TestMosquittoQoS(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	for _, v := range []string{"mqttv311", "mqttv5"} {
		t.Run(v, func(t *testing.T) {
			s := startSub(t, "-V", v, "-p", tn.port(), "-t", "sensors/#", "-q", "2", "-v", "-C", "3", "-W", "30")
			tn.subscribed(1)
			for q := range 3 {
				pub(t, tn, "-V", v, "-t", "sensors/room 1/temp", "-q", fmt.Sprint(q), "-m", fmt.Sprintf("v%d", q))
			}
			// Each publish is its own connection: MQTT orders none of them
			// against the others.
			got := lines(s.wait(t))
			slices.Sort(got)
			want := []string{"sensors/room 1/temp v0", "sensors/room 1/temp v1", "sensors/room 1/temp v2"}
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			tn.subscribed(0) // a clean session's subscription ends with it
		})
	}
}

// Wildcard filters: '+' one level, '#' any, as MQTT-4.7.1 says.
func TestMosquittoWildcards(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	plus := startSub(t, "-p", tn.port(), "-t", "sensors/+/temp", "-q", "1", "-v", "-C", "2", "-W", "30")
	hash := startSub(t, "-p", tn.port(), "-t", "sensors/a/#", "-q", "1", "-v", "-C", "3", "-W", "30")
	tn.subscribed(2)
	for _, topic := range []string{"sensors/a/temp", "sensors/a/b/temp", "sensors/a", "sensors/b/temp"} {
		pub(t, tn, "-t", topic, "-q", "1", "-m", "x")
	}
	if got, want := lines(plus.wait(t)), []string{"sensors/a/temp x", "sensors/b/temp x"}; !slices.Equal(got, want) {
		t.Errorf("sensors/+/temp got %q, want %q", got, want)
	}
	got := lines(hash.wait(t))
	slices.Sort(got)
	if want := []string{"sensors/a x", "sensors/a/b/temp x", "sensors/a/temp x"}; !slices.Equal(got, want) {
		t.Errorf("sensors/a/# got %q, want %q", got, want)
	}
}

// A retained message is kept per topic, survives a restart, is delivered
// to a new subscription with the retain flag, and an empty retained
// publish deletes it.
func TestMosquittoRetained(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	pub(t, tn, "-t", "sensors/a/state", "-q", "1", "-r", "-m", "old")
	pub(t, tn, "-t", "sensors/a/state", "-q", "1", "-r", "-m", "on")
	pub(t, tn, "-t", "sensors/b/state", "-q", "1", "-r", "-m", "off")
	tn.restart()
	s := startSub(t, "-p", tn.port(), "-t", "sensors/+/state", "-q", "1", "-F", "%r %t %p", "-C", "2", "-W", "30")
	got := lines(s.wait(t))
	slices.Sort(got)
	if want := []string{"1 sensors/a/state on", "1 sensors/b/state off"}; !slices.Equal(got, want) {
		t.Fatalf("retained after restart: got %q, want %q", got, want)
	}
	pub(t, tn, "-t", "sensors/a/state", "-q", "1", "-r", "-n")
	tn.restart()
	s = startSub(t, "-p", tn.port(), "-t", "sensors/+/state", "-q", "1", "-F", "%r %t %p", "-C", "1", "-W", "30")
	if got, want := lines(s.wait(t)), []string{"1 sensors/b/state off"}; !slices.Equal(got, want) {
		t.Fatalf("after deleting one: got %q, want %q", got, want)
	}
	if st := tn.Status().MQTT; st == nil || st.Retained != 1 {
		t.Fatalf("status retained: %+v", st)
	}
}

// A client that goes away without DISCONNECT has its will published.
func TestMosquittoWill(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	watcher := startSub(t, "-p", tn.port(), "-t", "sensors/+/status", "-q", "1", "-v", "-C", "1", "-W", "30")
	tn.subscribed(1)
	dying := startSub(t, "-p", tn.port(), "-i", "dev-7", "-t", "t/nothing", "--will-topic", "sensors/dev-7/status",
		"--will-payload", "offline", "--will-qos", "1")
	tn.subscribed(2)
	_ = dying.cmd.Process.Signal(syscall.SIGKILL)
	if got, want := lines(watcher.wait(t)), []string{"sensors/dev-7/status offline"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// A clean DISCONNECT discards the will (MQTT-3.1.2-10).
	pub(t, tn, "-i", "dev-8", "-t", "t/x", "-m", "x", "--will-topic", "sensors/dev-8/status", "--will-payload", "offline")
	// t/x is QoS 0: mosquitto_pub is gone before the node counted it.
	published := func() uint64 { pub := tn.Status().MQTT.Published; return uint64(pub[0] + pub[1] + pub[2]) }
	petreltest.Eventually(t, "the will and t/x published", func() bool { return published() >= 2 })
	if n := published(); n != 2 {
		t.Fatalf("published %d: want the will and t/x only", n)
	}
}

// A persistent session (-c, clean session off) is a durable subscription:
// what is published while its client is away, and across a restart of
// the node, is delivered when it comes back, at QoS 1 and 2.
func TestMosquittoPersistentSessionRestart(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	for _, v := range []string{"mqttv311", "mqttv5"} {
		t.Run(v, func(t *testing.T) {
			id := "site-b-" + v
			args := []string{"-V", v, "-p", tn.port(), "-i", id, "-c", "-t", "sensors/+/t", "-q", "2", "-v"}
			if v == "mqttv5" {
				args = append(args, "-x", "3600") // session expiry: the session outlives the connection
			}
			s := startSub(t, append(args, "-C", "1", "-W", "30")...)
			tn.subscribed(1)
			pub(t, tn, "-t", "sensors/x/t", "-q", "1", "-m", "live")
			s.wait(t)
			for i := range 3 {
				pub(t, tn, "-t", "sensors/x/t", "-q", fmt.Sprint(1+i%2), "-m", fmt.Sprintf("away-%d", i))
			}
			tn.restart()
			pub(t, tn, "-t", "sensors/y/t", "-q", "1", "-m", "after-restart")
			s = startSub(t, append(args, "-C", "4", "-W", "30")...)
			want := []string{"sensors/x/t away-0", "sensors/x/t away-1", "sensors/x/t away-2", "sensors/y/t after-restart"}
			// libmosquitto hands a QoS 2 message over at PUBREL, after
			// the QoS 1 one behind it.
			got := lines(s.wait(t))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			st := tn.Status().MQTT
			if st.Persistent != 1 {
				t.Fatalf("persistent sessions %d, want 1", st.Persistent)
			}
			// A clean session with the same id ends it, and its durable
			// subscription.
			out, err := mosquitto(t, "mosquitto_sub", "-V", v, "-p", tn.port(), "-i", id, "-t", "t/x", "-W", "1")
			_ = out
			_ = err
			petreltest.Eventually(t, "session dropped", func() bool { return len(tn.Subscriptions()) == 0 && tn.Status().MQTT.Persistent == 0 })
		})
	}
}

// A publish outside the topic spaces is refused: MQTT 3.1.1 closes the
// connection (no ack claims custody), MQTT 5 answers 0x90.
func TestMosquittoRefused(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	out, err := mosquitto(t, "mosquitto_pub", "-p", tn.port(), "-t", "orders/x", "-q", "1", "-m", "x")
	if err == nil {
		t.Fatalf("MQTT 3.1.1 publish outside the topic spaces succeeded: %s", out)
	}
	out, _ = mosquitto(t, "mosquitto_pub", "-V", "mqttv5", "-p", tn.port(), "-t", "orders/x", "-q", "1", "-m", "x")
	if !strings.Contains(out, "Topic Name invalid") {
		t.Fatalf("MQTT 5: %s", out)
	}
	if st := tn.Status().MQTT; st.Refused != 2 || st.Published != [3]int64{} {
		t.Fatalf("stats: %+v", st)
	}
}

// A persistent session whose client stays away holds at most its topic
// space's max_queued_messages (as Mosquitto's max_queued_messages bounds
// a client's queue): it gets the first publishes back when it returns,
// the rest were dropped and counted, and every publish was still
// acknowledged to its publisher.
func TestMosquittoOfflineSessionBounded(t *testing.T) {
	needMosquitto(t)
	cfg := baseConfig(t)
	cfg.Topics[0].MaxQueuedMessages = 3
	tn := openNode(t, cfg)
	args := []string{"-p", tn.port(), "-i", "away", "-c", "-t", "sensors/#", "-q", "1", "-v"}
	// -E: the session subscribes, and its client leaves at once.
	s := startSub(t, append(args, "-E")...)
	s.wait(t)
	tn.subscribed(1)
	for i := range 6 {
		pub(t, tn, "-t", "sensors/x", "-q", "1", "-m", fmt.Sprintf("away-%d", i))
	}
	subs := tn.Subscriptions()
	if len(subs) != 1 || subs[0].Depth != 3 || subs[0].MaxQueued != 3 || subs[0].Overflowed != 3 {
		t.Fatalf("the session's subscription: %+v; want depth 3, max queued 3, overflowed 3", subs)
	}
	s = startSub(t, append(args, "-C", "3", "-W", "30")...)
	if got, want := lines(s.wait(t)), []string{"sensors/x away-0", "sensors/x away-1", "sensors/x away-2"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// (mosquitto_sub -C 3 may leave before its last PUBACK goes: that
	// copy stays for the session's next connection, as QoS 1 has it.)
}
