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
	a, b := site("a", "b"), site("b", "a")
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
