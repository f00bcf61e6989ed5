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

func TestLinkDirectExactlyOnceInOrder(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	const total = 3000
	var pend []*petrel.Pending
	for i := 0; i < total; i++ {
		m := p.CreateDataMessage("orders@b")
		m.Priority = uint8(i % 3 * 4) // 0, 4, 8
		m.Body = []byte(fmt.Sprint(i))
		pend = append(pend, p.SendAsync(m))
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, seen := drainBodies(t, b, "orders", numbered(total), a)
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s arrived %d times", k, n)
		}
	}
	// Per priority, send order holds.
	last := map[uint8]int{}
	for _, d := range got {
		var i int
		fmt.Sscan(string(d.Body), &i)
		if prev, ok := last[d.Priority]; ok && i < prev {
			t.Fatalf("priority %d: %d arrived after %d", d.Priority, i, prev)
		}
		last[d.Priority] = i
	}
	if st, _ := b.QueueStat("orders"); st.Enqueued != total {
		t.Fatalf("b stored %d, want %d", st.Enqueued, total)
	}
	petreltest.Eventually(t, fmt.Sprintf("the link connected, empty, with all %d acked", total), func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Depth == 0 && l[0].Acked == total && l[0].State == "connected"
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
}

func TestRelayThroughCenter(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleRelay}}
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(cfg *petrel.Config) {
		cfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
		cfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
		cfg.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleSend, Node: "b"}}
	}))
	p := a.Producer()
	const total = 1000
	for i := 0; i < total; i++ {
		m := p.CreateCommandMessage("orders") // a send address: goes to orders@b
		m.Priority = uint8(i % 10)
		m.Body = []byte(fmt.Sprint(i))
		if i == 0 {
			m.TTL = time.Hour
		}
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := drainBodies(t, b, "orders", numbered(total), a, c)
	for _, d := range got {
		if d.Destination != "orders@b" {
			t.Fatalf("destination %q", d.Destination)
		}
		if string(d.Body) == "0" && (d.TTL <= 0 || d.TTL > time.Hour) {
			t.Fatalf("remaining TTL %v after two hops", d.TTL)
		}
	}
	if st, _ := c.QueueStat("orders@b"); st.Enqueued != total {
		t.Fatalf("relay stored %d, want %d", st.Enqueued, total)
	}
}

func TestRefusedMessageGoesToDeadLetter(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.NoAutoCreate = true }))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	m := p.CreateDataMessage("nowhere@b")
	m.Body = []byte("lost?")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	dlq, err := a.Consumer("nowhere.dlq")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := dlq.Receive(ctx)
	if err != nil {
		t.Fatalf("refused message not dead-lettered: %v; links %+v", err, a.Links())
	}
	if string(d.Body) != "lost?" || !strings.Contains(d.Reason, "refused") {
		t.Fatalf("dead letter %q reason %q", d.Body, d.Reason)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if st := b.ReceiverStats(); st.Stored != 0 {
		t.Fatalf("b stored a refused message: %+v", st)
	}
}

func TestWrongSecretIsRefused(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Secret = "right" }))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Secret = "wrong"
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@b")); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "b counting the authentication failure", func() bool { return b.ReceiverStats().AuthFailed > 0 }, func() string { return fmt.Sprintf("%+v", b.ReceiverStats()) })
	petreltest.Eventually(t, "the link backing off with an error", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].State == "backing off" && l[0].LastError != ""
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })
	if len(b.QueueStats()) != 0 {
		t.Fatalf("a queue was touched before authentication: %+v", b.QueueStats())
	}
	if l := a.Links(); l[0].Depth != 1 {
		t.Fatalf("message left the send queue: %+v", l)
	}
}

func TestBacklogFlowsWhenPeerComesBack(t *testing.T) {
	// Reserve a port, then bring b up on it only after a has queued.
	addr := freeAddr(t)
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addr}}
	}))
	p := a.Producer()
	const total = 500
	for i := 0; i < total; i++ {
		m := p.CreateDataMessage("orders@b")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, "the link reconnecting to the absent b", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Reconnects > 0
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })
	urgent := p.CreateCommandMessage("orders@b")
	urgent.Priority = 9
	urgent.Body = []byte("urgent")
	if err := p.Send(context.Background(), urgent); err != nil {
		t.Fatal(err)
	}
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(addr))
	got, _ := drainBodies(t, b, "orders", append(numbered(total), "urgent"), a)
	if string(got[0].Body) != "urgent" {
		t.Fatalf("first delivery %q; the priority-9 message sent after the backlog must come first", got[0].Body)
	}
}

func TestBadFramesDoNotStopTheNode(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	bad := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03}, // a TLS ClientHello's start
		{1, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff},                   // an oversized length
		{0xee, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},                         // unknown type
		{2, 0, 0},                                                    // truncated
	}
	for _, frame := range bad {
		c, err := net.Dial("tcp", b.ListenAddr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(frame)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				break // the node closed it
			}
		}
		c.Close()
	}
	petreltest.Eventually(t, "b counting every bad frame as a failed handshake", func() bool { return b.ReceiverStats().HandshakeFailed >= int64(len(bad)) }, func() string { return fmt.Sprintf("%+v", b.ReceiverStats()) })
	// A good link still works.
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	m := p.CreateDataMessage("orders@b")
	m.Body = []byte("fine")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	drainBodies(t, b, "orders", []string{"fine"}, a)
}

func TestSendToUnroutableNodeIsRefused(t *testing.T) {
	a := nodes.Open(t, nodes.Name("a"))
	p := a.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@mars")); !errors.Is(err, petrel.ErrNoRoute) {
		t.Fatalf("got %v, want ErrNoRoute", err)
	}
}

func TestConfigRefusesRouteThroughUnknownNode(t *testing.T) {
	_, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet,
		Routes: []petrel.RouteConfig{{Node: "b", Via: "c"}}})
	var ce *petrel.ConfigError
	if !errors.As(err, &ce) || ce.Field != "routes[0].via" {
		t.Fatalf("got %v, want a ConfigError on routes[0].via", err)
	}
	_, err = petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet,
		Addresses: []petrel.AddressConfig{{Name: "x", Role: address.RoleSend, Node: "b"}}})
	if !errors.As(err, &ce) || ce.Field != "addresses[0].node" {
		t.Fatalf("got %v, want a ConfigError on addresses[0].node", err)
	}
}

// TestFailoverAndBack: A reaches "b" through failover:(main,backup). With
// the main down, traffic goes to the backup; once the main is back, the
// link returns to it.
func TestFailoverAndBack(t *testing.T) {
	mainAddr := freeAddr(t)
	backup := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: fmt.Sprintf("failover:(tcp://%s,tcp://%s)", mainAddr, backup.ListenAddr())}}
		c.Link.MainProbe = 50 * time.Millisecond
	}))
	p := a.Producer()
	send := func(body string) {
		m := p.CreateDataMessage("orders@b")
		m.Body = []byte(body)
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	send("to backup")
	drainBodies(t, backup, "orders", []string{"to backup"}, a)
	if l := a.Links()[0]; l.Addr != backup.ListenAddr() {
		t.Fatalf("link on %q, want the backup %q", l.Addr, backup.ListenAddr())
	}
	main := nodes.Open(t, nodes.Name("b"), nodes.Listen(mainAddr))
	petreltest.Eventually(t, "the link back on the main", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Addr == mainAddr && l[0].State == "connected"
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })
	send("to main")
	drainBodies(t, main, "orders", []string{"to main"}, a)
}

// Kept for tests that still call them: new tests use nodes.Open,
// nodes.TCP, nodes.Dial and petreltest.Eventually, whose Patience bounds
// every wait (within is ignored).

func openNode(t testing.TB, name, listen string, mod func(*petrel.Config)) *petrel.Node {
	t.Helper()
	return nodes.Open(t, nodes.Name(name), nodes.Listen(listen), nodes.With(mod))
}

func open(t *testing.T, mod func(*petrel.Config)) *petrel.Node {
	t.Helper()
	return nodes.Open(t, nodes.With(mod))
}

func waitFor(t *testing.T, _ time.Duration, cond func() bool, state func() string) {
	t.Helper()
	petreltest.Eventually(t, "a condition", cond, state)
}

func tcp(n *petrel.Node) string { return nodes.TCP(n) }
