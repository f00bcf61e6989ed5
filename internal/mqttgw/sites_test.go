package mqttgw_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// An MQTT publish at site A reaches a persistent MQTT session at site B
// through interest forwarding, also what is published while B is closed.
func TestMosquittoAcrossSites(t *testing.T) {
	needMosquitto(t)
	a, b := twoSites(t)
	s := startSub(t, "-p", b.port(), "-i", "site-b", "-c", "-q", "1", "-t", "sensors/#", "-v", "-C", "1", "-W", "30")
	petreltest.Eventually(t, "a learned b's interest", func() bool { return len(a.TopicInterest()) > 0 })
	pub(t, a, "-t", "sensors/line-1/temp", "-q", "1", "-m", "from-a")
	if got := lines(s.wait(t)); !slices.Equal(got, []string{"sensors/line-1/temp from-a"}) {
		t.Fatalf("got %q", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		pub(t, a, "-t", "sensors/line-1/temp", "-q", "1", "-m", fmt.Sprintf("while-b-down-%d", i))
	}
	b.open()
	s = startSub(t, "-p", b.port(), "-i", "site-b", "-c", "-q", "1", "-t", "sensors/#", "-v", "-C", "5", "-W", "30")
	got := lines(s.wait(t))
	for i := range 5 {
		if want := fmt.Sprintf("sensors/line-1/temp while-b-down-%d", i); got[i] != want {
			t.Fatalf("got %q, want %q at %d", got, want, i)
		}
	}
}

// twoSites opens nodes a and b, each with an MQTT listener, linked as
// each other's neighbour on loopback.
func twoSites(t *testing.T) (a, b *testNode) {
	t.Helper()
	addr := map[string]string{}
	for _, name := range []string{"a", "b"} {
		// Below the ephemeral range, so that no socket bound to port 0
		// takes it before the node listens (see nodeproc.FreePort).
		port, err := nodeproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr[name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	site := func(name, other string) *testNode {
		cfg := baseConfig(t)
		cfg.Name, cfg.Listen = name, addr[name]
		cfg.Nodes = []petrel.NodeConfig{{Name: other, Connector: "tcp://" + addr[other]}}
		return openNode(t, cfg)
	}
	return site("a", "b"), site("b", "a")
}

// A retained publish at site A crosses to site B by interest forwarding,
// and B keeps it as its topic's retained message, as a Mosquitto bridge's
// far end does: a subscriber that comes to B later, after a restart of B
// too, gets it with RETAIN set; an empty retained publish at A deletes it
// at B as well. B keeps what it saw pass: the topics some subscription at
// B wanted when they were published.
func TestMosquittoRetainedAcrossSites(t *testing.T) {
	needMosquitto(t)
	a, b := twoSites(t)
	s := startSub(t, "-p", b.port(), "-i", "site-b", "-c", "-q", "1", "-t", "sensors/#", "-C", "1", "-W", "30")
	petreltest.Eventually(t, "a learned b's interest", func() bool { return len(a.TopicInterest()) > 0 })
	pub(t, a, "-t", "sensors/line-1/state", "-q", "1", "-r", "-m", "on")
	s.wait(t)
	petreltest.Eventually(t, "b keeps it", func() bool { return b.Status().MQTT.Retained == 1 })

	later := func() []string {
		s := startSub(t, "-p", b.port(), "-t", "sensors/+/state", "-q", "1", "-F", "%r %t %p", "-C", "1", "-W", "30")
		return lines(s.wait(t))
	}
	if got, want := later(), []string{"1 sensors/line-1/state on"}; !slices.Equal(got, want) {
		t.Fatalf("a later subscriber at b got %q, want %q", got, want)
	}
	b.restart()
	if got, want := later(), []string{"1 sensors/line-1/state on"}; !slices.Equal(got, want) {
		t.Fatalf("after b restarted: %q, want %q", got, want)
	}

	pub(t, a, "-t", "sensors/line-1/state", "-q", "1", "-r", "-n")
	petreltest.Eventually(t, "b deleted it", func() bool { return b.Status().MQTT.Retained == 0 })
}
