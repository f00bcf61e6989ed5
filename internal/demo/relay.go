package demo

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
)

// The relay part of the demo: three nodes on loopback, A -> C -> B, where C
// relays relayAddr for B.
const (
	relayAddr = "relay.orders"
	nodeA     = "demo-a"
	nodeC     = "demo-c"
	nodeB     = "demo-b"
)

// relayDemo holds the three nodes of the relay steps.
type relayDemo struct {
	a, c, b *petrel.Node
}

func (d *demo) openNode(ctx context.Context, cfg petrel.Config) (*petrel.Node, error) {
	cfg.DataDir = filepath.Join(d.dir, cfg.Name)
	cfg.Logger = d.log
	cfg.Link.ReconnectMin = 20 * time.Millisecond
	cfg.Link.ReconnectMax = 200 * time.Millisecond
	n, err := petrel.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Name, err)
	}
	d.nodes = append(d.nodes, n)
	return n, nil
}

func startRelayNetwork(ctx context.Context, d *demo) error {
	// Each node names its neighbours, and topic interest travels both
	// ways, so every port is chosen before any node opens.
	ports, err := freeLoopbackAddrs(3)
	if err != nil {
		return err
	}
	aAddr, cAddr, bAddr := ports[0], ports[1], ports[2]
	topics := []petrel.TopicConfig{{Pattern: topicSpace}}
	r := &relayDemo{}
	if r.b, err = d.openNode(ctx, petrel.Config{
		Name: nodeB, Listen: bAddr, Topics: topics,
		Nodes: []petrel.NodeConfig{{Name: nodeC, Connector: "tcp://" + cAddr}},
	}); err != nil {
		return err
	}
	if r.c, err = d.openNode(ctx, petrel.Config{
		Name: nodeC, Listen: cAddr, Topics: topics,
		Nodes:     []petrel.NodeConfig{{Name: nodeB, Connector: "tcp://" + bAddr}, {Name: nodeA, Connector: "tcp://" + aAddr}},
		Addresses: []petrel.AddressConfig{{Name: relayAddr, Role: address.RoleRelay}},
	}); err != nil {
		return err
	}
	if r.a, err = d.openNode(ctx, petrel.Config{
		Name: nodeA, Listen: aAddr, Topics: topics,
		Nodes:  []petrel.NodeConfig{{Name: nodeC, Connector: "tcp://" + cAddr}},
		Routes: []petrel.RouteConfig{{Node: nodeB, Via: nodeC}},
	}); err != nil {
		return err
	}
	d.relay = r
	d.printf("%s listens on %s and receives %s", nodeB, r.b.ListenAddr(), relayAddr)
	d.printf("%s listens on %s and relays %s to %s", nodeC, r.c.ListenAddr(), relayAddr, nodeB)
	d.printf("%s sends to %s@%s through %s (route: %s via %s)", nodeA, relayAddr, nodeB, nodeC, nodeB, nodeC)
	d.printf("all three declare the topic space %s", topicSpace)
	return nil
}

// freeLoopbackAddrs returns n addresses of 127.0.0.1 that nothing listens
// on now.
func freeLoopbackAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		out = append(out, l.Addr().String())
		defer l.Close() // held until all are chosen, so that none repeats
	}
	return out, nil
}

// sendAcrossRelay sends a mixed batch from A and lets it all reach B's
// queue before B consumes, so B's consumer shows priority order.
func sendAcrossRelay(ctx context.Context, d *demo) error {
	r := d.relay
	p := r.a.Producer()
	want := []string{}
	for i, prio := range []uint8{2, 9, 5, 9, 0, 5, 2, 7} {
		m := p.CreateCommandMessage(relayAddr + "@" + nodeB)
		m.Priority = prio
		m.Command.Command = "move"
		m.Body = []byte(fmt.Sprintf("crate %d (prio %d)", i, prio))
		if err := p.Send(ctx, m); err != nil {
			return err
		}
		want = append(want, string(m.Body))
	}
	d.printf("%s sent %d messages; each Send returned once durable at %s", nodeA, len(want), nodeA)
	arrived := waitFor(ctx, func() bool {
		st, ok := r.b.QueueStat(relayAddr)
		return ok && st.Depth == int64(len(want))
	})
	if err := d.check(arrived, fmt.Sprintf("all %d crossed %s and are stored at %s", len(want), nodeC, nodeB), fmt.Sprintf("links of %s: %+v", nodeA, r.a.Links())); err != nil {
		return err
	}
	c, err := r.b.Consumer(relayAddr)
	if err != nil {
		return err
	}
	var got []*petrel.Delivery
	for range want {
		dl, err := receiveOne(ctx, c)
		if err != nil {
			return err
		}
		d.printf("%s got  prio %d  %-8s %q  from %s", nodeB, dl.Priority, dl.Kind, dl.Body, dl.Destination)
		got = append(got, dl)
		dl.Ack()
	}
	ordered := sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Priority > got[j].Priority })
	return d.check(ordered, "B consumed them highest priority first", fmt.Sprintf("got %v", bodiesOf(got)))
}

func bodiesOf(ds []*petrel.Delivery) []string {
	out := make([]string, len(ds))
	for i, dl := range ds {
		out[i] = string(dl.Body)
	}
	return out
}

// cutLink streams messages from A while the A-C link is cut twice, then
// checks that every message reached B exactly once.
func cutLink(ctx context.Context, d *demo) error {
	r := d.relay
	p := r.a.Producer()
	const total = 300
	var pend []*petrel.Pending
	for i := 0; i < total; i++ {
		m := p.CreateDataMessage(relayAddr + "@" + nodeB)
		m.Data = message.DataProps{DataType: "reading", Encoding: "text"}
		m.Body = []byte(fmt.Sprintf("reading %03d", i))
		pend = append(pend, p.SendAsync(m))
		if i == total/3 || i == 2*total/3 {
			r.a.CutLink(nodeC)
			d.printf("cut the %s-%s link after %d sends", nodeA, nodeC, i+1)
		}
	}
	for _, pd := range pend {
		if err := pd.Wait(ctx); err != nil {
			return err
		}
	}
	c, err := r.b.Consumer(relayAddr)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	deadline := time.Now().Add(demoTimeout)
	for len(seen) < total && time.Now().Before(deadline) {
		dl, err := receiveOne(ctx, c)
		if err != nil {
			return d.check(false, "every message crossed the cut link", fmt.Sprintf("%d of %d arrived: %v", len(seen), total, err))
		}
		seen[string(dl.Body)]++
		dl.Ack()
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	links := r.a.Links()
	var reconnects int64
	for _, l := range links {
		reconnects += l.Reconnects
		d.printf("link %s: %s via %s, sent %d, acked %d, reconnects %d, depth %d", l.Queue, l.State, l.NextHop, l.Sent, l.Acked, l.Reconnects, l.Depth)
	}
	if err := d.check(len(seen) == total, fmt.Sprintf("all %d messages reached %s after the cuts", total, nodeB), fmt.Sprintf("%d arrived", len(seen))); err != nil {
		return err
	}
	st := r.c.Status()
	d.printf("%s dropped %d resent duplicates on arrival (dedupe)", nodeC, st.Receiver.Deduped)
	return d.check(dups == 0, "none arrived twice", fmt.Sprintf("%d duplicates: %s", dups, strings.Join(keysOf(seen), ",")))
}

func keysOf(m map[string]int) []string {
	var out []string
	for k, n := range m {
		if n > 1 {
			out = append(out, k)
		}
	}
	return out
}
