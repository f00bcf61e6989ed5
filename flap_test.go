package petrel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// flapProxy forwards TCP connections to target and, on cut, drops every
// connection it carries.
type flapProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	pairs  [][2]net.Conn // in accept order, for cutLast
	wg     sync.WaitGroup
	// refusing closes each new connection as soon as it is accepted.
	refusing atomic.Bool
}

func newFlapProxy(t *testing.T, target string) *flapProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flapProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *flapProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refusing.Load() {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.pairs = append(p.pairs, [2]net.Conn{in, out})
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *flapProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut drops every connection, mid-frame or not.
func (p *flapProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	return len(p.conns) / 2
}

// dial dials the node behind p, as client app-1 unless opts names
// another, reconnecting within 5–20 ms; the client closes with the test.
func (p *flapProxy) dial(t *testing.T, opts petrel.DialOptions) *petrel.Client {
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
	c, err := petrel.Dial(ctx, "tcp://"+p.ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cutLast drops the connection accepted last, of those still open, and
// reports whether there was one.
func (p *flapProxy) cutLast() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.pairs) - 1; i >= 0; i-- {
		in, out := p.pairs[i][0], p.pairs[i][1]
		if _, open := p.conns[in]; open {
			in.Close()
			out.Close()
			return true
		}
	}
	return false
}

func (p *flapProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// openFDs counts the open file descriptors, pipes aside: the proxy's
// io.Copy between TCP connections splices through pipes that the runtime
// pools and closes later.
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
		proxy := newFlapProxy(t, b.ListenAddr())
		a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
			c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + proxy.ln.Addr().String()}}
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
			cuts += proxy.cut()
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
		proxy.close()
	}()
	if after := openFDs(t); after > fdsBefore {
		t.Fatalf("%d file descriptors open before, %d after: a leak", fdsBefore, after)
	}
}
