package petrel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// dialVia dials the node behind proxy p, as client app-1 unless opts
// names another, reconnecting within 5–20 ms; the client closes with the
// test.
func dialVia(t *testing.T, p *petreltest.Proxy, opts petrel.DialOptions) *petrel.Client {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "app-1"
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	opts.ReconnectMin, opts.ReconnectMax = 5*time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	c, err := petrel.Dial(ctx, "tcp://"+p.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openFDs counts the open file descriptors, pipes aside: io.Copy between
// TCP connections splices through pipes that the runtime pools and closes
// later.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); !strings.HasPrefix(l, "pipe:") {
			n++
		}
	}
	return n
}

// TestLinkFlap drops the A-B connection every 200ms for 30s (3s with
// -short) while A sends. Nothing is lost or duplicated, and no file
// descriptors leak (goroutines are checked by goleak in TestMain).
func TestLinkFlap(t *testing.T) {
	run := 30 * time.Second
	if testing.Short() {
		run = 3 * time.Second
	}
	fdsBefore := openFDs(t)
	func() {
		b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
		proxy := petreltest.NewProxy(t, b.ListenAddr())
		a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
			c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + proxy.Addr()}}
			c.Link.ReconnectMin = 5 * time.Millisecond
			c.Link.ReconnectMax = 50 * time.Millisecond
		}))
		p := a.Producer()
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()
		var wg sync.WaitGroup
		sent := 0
		wg.Go(func() {
			for ctx.Err() == nil {
				m := p.CreateDataMessage("orders@b")
				m.Priority = uint8(sent % 10)
				m.Body = []byte(fmt.Sprint(sent))
				if err := p.Send(context.Background(), m); err != nil {
					t.Error(err)
					return
				}
				sent++
				if sent%50 == 0 {
					time.Sleep(time.Millisecond) // keep the rate modest: this is about cuts, not speed
				}
			}
		})
		cuts := 0
		tick := time.NewTicker(200 * time.Millisecond)
		for ctx.Err() == nil {
			<-tick.C
			cuts += proxy.Cut()
		}
		tick.Stop()
		wg.Wait()
		t.Logf("sent %d messages through %d cuts", sent, cuts)
		_, seen := drainBodies(t, b, "orders", numbered(sent), a)
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s arrived %d times", k, n)
			}
		}
		if cuts < 5 {
			t.Fatalf("only %d connections were cut: the test proved little", cuts)
		}
		l := a.Links()[0]
		t.Logf("link: reconnects %d, sent %d, acked %d; b deduped %d", l.Reconnects, l.Sent, l.Acked, b.ReceiverStats().Deduped)
		a.Close()
		b.Close()
		proxy.Close()
	}()
	if after := openFDs(t); after > fdsBefore {
		t.Fatalf("%d file descriptors open before, %d after: a leak", fdsBefore, after)
	}
}
