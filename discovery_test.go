package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// freeUDPPort returns a UDP port that nothing listens on now.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestDiscoveredNodeIsReachable: A has no configuration for B; B announces
// itself by broadcast on loopback, A hears it and delivers to it. When B
// stops, A forgets it within the timeout; a send to it still waits in its
// send queue (a silent node is cut off, not removed), and its link backs
// off for want of a route.
func TestDiscoveredNodeIsReachable(t *testing.T) {
	disc := petrel.DiscoveryConfig{
		Enabled: true, Group: fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t)),
		Period: 50 * time.Millisecond, Timeout: 500 * time.Millisecond,
	}
	b, err := petrel.Open(context.Background(), petrel.Config{Name: "b", DataDir: t.TempDir(), Logger: quiet,
		Listen: "127.0.0.1:0", Discovery: disc})
	if err != nil {
		t.Skipf("discovery by broadcast is not available here: %v", err)
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) { c.Discovery = disc }))
	petreltest.Eventually(t, "b discovered by a", func() bool {
		for _, e := range a.Directory() {
			if e.Name == "b" && e.Source == address.SourceDiscovered {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%+v", a.Directory()) })
	p := a.Producer()
	m := p.CreateDataMessage("orders@b")
	m.Body = []byte("found you")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	drainBodies(t, b, "orders", []string{"found you"}, a)
	petreltest.Eventually(t, "the message to b acked", func() bool { return a.Links()[0].Acked == 1 }, func() string { return fmt.Sprintf("%+v", a.Links()) })

	b.Close()
	petreltest.Eventually(t, "b forgotten once it stopped", func() bool { return len(a.Directory()) == 0 }, func() string { return fmt.Sprintf("%+v", a.Directory()) })
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@b")); err != nil {
		t.Fatalf("send to a node that went silent: %v", err)
	}
	petreltest.Eventually(t, "the link to b backing off with the message queued", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Depth == 1 && l[0].State == "backing off" && strings.Contains(l[0].LastError, "no route")
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })
	// A node never heard of is no outage.
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@nobody")); !errors.Is(err, petrel.ErrNoRoute) {
		t.Fatalf("send to a node never heard of: %v, want ErrNoRoute", err)
	}
}
