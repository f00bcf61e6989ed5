package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A full store at the receiving end of a link or a remote client is a
// pause, not an end: once room returns, what waited flows on the same
// link, or the same client, with no restart, each message once.

// fullCap is the store bound of the receiving node in these tests.
const fullCap = 100

// withCap bounds a node's store to fullCap messages, past which puts fail
// (on_full: error, the default).
func withCap(c *petrel.Config) { c.Store.MaxMessages = fullCap }

// take receives and acks n messages of addr on node, making room for n.
func take(t *testing.T, node *petrel.Node, addr string, n int) {
	t.Helper()
	c, err := node.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	for i := range n {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("took %d of %d: %v", i, n, err)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreFullLinkResumesWhenRoomReturns: a link into a node whose
// store is full ends its session with the reason, which its status
// shows, backs off and tries again; once the consumer made room,
// everything arrives, each message once, with no restart.
func TestStoreFullLinkResumesWhenRoomReturns(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(withCap))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	const total = fullCap + 50
	p := a.Producer()
	for i := range total {
		m := p.CreateDataMessage("orders@b")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, "b full, and a's link saying so", func() bool {
		st, _ := b.QueueStat("orders")
		l := a.Links()
		return st.Depth == fullCap && len(l) == 1 && strings.Contains(l[0].LastError, "store full at b")
	}, func() string { st, _ := b.QueueStat("orders"); return fmt.Sprintf("b: %+v\na: %+v", st, a.Links()) })
	if n := b.ReceiverStats().StoreFull; n == 0 {
		t.Error("b counted no session ended by its full store")
	}
	// Room for 60, more than the 50 left: the rest arrives without a
	// restart, and drainBodies checks that each body arrives once.
	take(t, b, "orders", 60)
	want := numbered(total)[60:]
	drainBodies(t, b, "orders", want, a)
	if l := a.Links(); l[0].Acked != total {
		t.Fatalf("a's link acked %d, want %d: %+v", l[0].Acked, total, l)
	}
}

// TestStoreFullRemoteSendFailsThenSucceeds: a remote client's Send into
// a full node fails at once with ErrStoreFull, and the same client's
// Send succeeds once room returns.
func TestStoreFullRemoteSendFailsThenSucceeds(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(withCap))
	p := nodes.Dial(t, n, petrel.DialOptions{}).Producer()
	send := func(body string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m := p.CreateDataMessage("orders")
		m.Body = []byte(body)
		return p.Send(ctx, m)
	}
	for i := range fullCap {
		if err := send(fmt.Sprint(i)); err != nil {
			t.Fatalf("send %d of %d: %v", i, fullCap, err)
		}
	}
	start := time.Now()
	err := send("over")
	if !errors.Is(err, petrel.ErrStoreFull) {
		t.Fatalf("send past the cap: %v, want ErrStoreFull", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("send past the cap took %v to fail", d)
	}
	// Async sends fail the same way, each of them.
	var pend []*petrel.Pending
	for i := range 5 {
		m := p.CreateDataMessage("orders")
		m.Body = []byte(fmt.Sprint("async-", i))
		pend = append(pend, p.SendAsync(m))
	}
	for i, pd := range pend {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := pd.Wait(ctx)
		cancel()
		if !errors.Is(err, petrel.ErrStoreFull) {
			t.Fatalf("async send %d past the cap: %v, want ErrStoreFull", i, err)
		}
	}
	take(t, n, "orders", 10)
	for i := range 10 {
		if err := send(fmt.Sprint("after-", i)); err != nil {
			t.Fatalf("send %d after room returned: %v", i, err)
		}
	}
	if st, _ := n.QueueStat("orders"); st.Depth != fullCap {
		t.Fatalf("orders holds %d, want %d: %+v", st.Depth, fullCap, st)
	}
	take(t, n, "orders", fullCap)
}
