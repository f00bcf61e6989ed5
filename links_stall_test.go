package petrel_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/sender"
	"github.com/petrelmq/petrel/session"
)

// TestLinkStallVisible: a link that stops carrying anything, without
// any connection being closed, and a next hop that takes messages but
// never acks them, both show in Links() within a bounded wait, with
// what went wrong (PITFALLS 9).
func TestLinkStallVisible(t *testing.T) {
	t.Run("blackholed path", linkBlackholed)
	t.Run("unacked window", linkWindowStalled)
}

// linkBlackholed: a's link to b passes through a proxy that is switched
// to a black hole. With a 1 s idle timeout, a's link must leave the
// connected state and say the peer went silent; once the path carries
// again it reconnects, and a message sent meanwhile arrives.
func linkBlackholed(t *testing.T) {
	const idle = time.Second
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Link.IdleTimeout = idle
	}))
	proxy := petreltest.NewProxy(t, b.ListenAddr())
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + proxy.Addr()}}
		c.Link.IdleTimeout = idle
		// A handshake begun into the hole must end soon once it is gone.
		c.Link.HandshakeTimeout = 2 * time.Second
	}))
	links := func() string { return fmt.Sprintf("a's links: %+v", a.Links()) }
	send := func(body string) {
		t.Helper()
		m := a.Producer().CreateDataMessage("orders@b")
		m.Body = []byte(body)
		if err := a.Producer().Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := b.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	receive := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
		defer cancel()
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("%q never arrived: %v\n%s", want, err, links())
		}
		if string(d.Body) != want {
			t.Fatalf("got %q, want %q", d.Body, want)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}

	send("before")
	receive("before")
	petreltest.Eventually(t, "a's link connected and idle", func() bool {
		l, ok := linkStatusOf(a, "orders@b")
		return ok && l.State == sender.StateConnected && l.InFlight == 0
	}, links)
	// Idle but healthy: heartbeats keep it up across several idle
	// timeouts.
	time.Sleep(3 * idle)
	if l, _ := linkStatusOf(a, "orders@b"); l.State != sender.StateConnected || l.Reconnects != 0 || l.LastError != "" {
		t.Fatalf("an idle healthy link did not stay up: %+v", l)
	}

	proxy.Blackhole(true)
	cut := time.Now()
	var down petrel.LinkStatus
	petreltest.Eventually(t, "a's link shown down, with why", func() bool {
		l, ok := linkStatusOf(a, "orders@b")
		down = l
		return ok && l.State != sender.StateConnected && l.LastError != ""
	}, links)
	seen := time.Since(cut)
	if !strings.Contains(down.LastError, session.ErrIdle.Error()) && !strings.Contains(down.LastError, "nothing received") {
		t.Fatalf("the link is down but its last error does not say the peer went silent: %+v", down)
	}
	if down.LastErrorAt.Before(cut) {
		t.Fatalf("last error dated %v, before the path went dark at %v", down.LastErrorAt, cut)
	}
	t.Logf("down %v after the path went dark: %s: %q", seen.Round(time.Millisecond), down.State, down.LastError)

	send("during") // durable at a; goes once the path is back
	time.Sleep(idle / 2)
	if l, _ := linkStatusOf(a, "orders@b"); l.State == sender.StateConnected {
		t.Fatalf("a's link shown connected through a black hole: %+v", l)
	}

	proxy.Blackhole(false)
	receive("during")
	petreltest.Eventually(t, "a's link connected again", func() bool {
		l, ok := linkStatusOf(a, "orders@b")
		return ok && l.State == sender.StateConnected && l.Reconnects > 0 && l.InFlight == 0 && l.Depth == 0
	}, links)
}

// silentNode accepts links as node name, takes their messages and
// never acks them: a next hop that is alive (it answers heartbeats) but
// does not commit. It returns the tcp:// connector and the count of
// messages it read.
func silentNode(t *testing.T, name string, window uint32) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		cancel()
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(*session.Conn).Close(); return true })
		wg.Wait()
	})
	read := new(atomic.Int64)
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				c, err := session.Server(ctx, nc, session.Config{Name: name, ID: message.NodeID{0xb}, Logger: nodes.Quiet})
				if err != nil {
					nc.Close()
					return
				}
				conns.Store(c, nil)
				defer c.Close()
				for {
					s, err := c.Accept(ctx)
					if err != nil {
						return
					}
					if s.Accept(window) != nil {
						continue
					}
					wg.Go(func() {
						for {
							if _, err := s.Recv(ctx); err != nil {
								return
							}
							read.Add(1)
						}
					})
				}
			})
		}
	})
	return "tcp://" + ln.Addr().String(), read
}

// linkWindowStalled: a's next hop reads every message and answers
// heartbeats but acks nothing. a's window fills, and after the stall
// delay (link.stall_after, 2 s here, 10 s by default) Links() says the
// link is stalled while it stays connected.
func linkWindowStalled(t *testing.T) {
	const window = 8
	addr, read := silentNode(t, "b", window)
	a := nodes.Open(t, nodes.Name("a"), nodes.LeasesMayRemain(), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: addr}}
		c.Link.IdleTimeout = time.Second // heartbeats, not traffic, keep it up
		c.Link.StallAfter = 2 * time.Second
	}))
	p := a.Producer()
	for i := range 3 * window {
		m := p.CreateDataMessage("orders@b")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	links := func() string { return fmt.Sprintf("a's links: %+v; the silent peer read %d", a.Links(), read.Load()) }
	petreltest.Eventually(t, "a's window full", func() bool {
		l, ok := linkStatusOf(a, "orders@b")
		return ok && l.InFlight == window && read.Load() == window
	}, links)
	full := time.Now()
	if l, _ := linkStatusOf(a, "orders@b"); l.Stalled {
		t.Fatalf("stalled as soon as the window filled: %+v", l)
	}
	var l petrel.LinkStatus
	petreltest.Eventually(t, "a's link reported stalled", func() bool {
		l, _ = linkStatusOf(a, "orders@b")
		return l.Stalled
	}, links)
	t.Logf("stalled after %v", time.Since(full).Round(time.Millisecond))
	if l.State != sender.StateConnected || l.InFlight != window || l.Acked != 0 || l.Reconnects != 0 {
		t.Fatalf("a stalled link should stay connected, its window full and nothing acked: %+v", l)
	}
}
