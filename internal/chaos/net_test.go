package chaos

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes lines until the listener closes.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for {
					s, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(s))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func freeAddr(t *testing.T) string {
	// Below the ephemeral range, so that no socket bound to port 0 takes
	// it before the proxy listens (see nodeproc.FreePort).
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// roundTrip reports whether a line sent through addr comes back within d.
func roundTrip(addr string, d time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	s, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && s == "ping\n"
}

// TestNetFaults shows each fault cutting a real TCP path and the path
// coming back after it.
func TestNetFaults(t *testing.T) {
	up := echoServer(t)
	n := NewNet()
	defer n.Close()
	listen := freeAddr(t)
	if err := n.Add("a", "b", listen, up); err != nil {
		t.Fatal(err)
	}
	if !roundTrip(listen, 2*time.Second) {
		t.Fatal("no round trip through a healthy proxy")
	}
	if !n.Flap("a", "b", 300*time.Millisecond) {
		t.Fatal("flap refused")
	}
	if roundTrip(listen, 100*time.Millisecond) {
		t.Error("a round trip while the link flapped")
	}
	petreltest.Eventually(t, "the link comes back after the flap", func() bool { return roundTrip(listen, 200*time.Millisecond) })
	if n.Partition("b", 500*time.Millisecond) != 2 {
		t.Fatal("partition cut no stream")
	}
	if roundTrip(listen, 200*time.Millisecond) {
		t.Error("a round trip through a partition")
	}
	petreltest.Eventually(t, "a round trip after the partition", func() bool { return roundTrip(listen, 200*time.Millisecond) })
	// Heal ends a fault before its time.
	n.Flap("a", "b", time.Hour)
	n.Heal()
	if !roundTrip(listen, 2*time.Second) {
		t.Error("no round trip after Heal")
	}
}
