package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestReconfigureRouteAndRelayWhileTrafficFlows starts with A sending
// straight to B; while A sends, C is told to relay for B and A is told to
// reach B through C instead. Every message arrives once, and the link
// moves to C.
func TestReconfigureRouteAndRelayWhileTrafficFlows(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"))
	aCfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet, Link: nodes.FastLinks,
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}, {Name: "c", Connector: nodes.TCP(c)}}}
	a, err := petrel.Open(context.Background(), aCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	p := a.Producer()
	const total = 2000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < total; i++ {
			m := p.CreateDataMessage("orders@b")
			m.Body = []byte(fmt.Sprint(i))
			if err := p.Send(context.Background(), m); err != nil {
				t.Error(err)
				return
			}
		}
	})
	petreltest.Eventually(t, "over 100 messages acked", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Acked > 100
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })

	cCfg := petrel.Config{Name: "c", Listen: c.ListenAddr(), Logger: quiet, Link: nodes.FastLinks,
		Nodes:     []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}},
		Addresses: []petrel.AddressConfig{{Name: "orders", Role: address.RoleRelay}}}
	cCfg.DataDir = c.DataDir()
	if r, err := c.Reconfigure(context.Background(), cCfg); err != nil || !slices.Contains(r.Applied, "addresses") {
		t.Fatalf("reconfigure c: %+v %v", r, err)
	}
	aCfg.Nodes = []petrel.NodeConfig{{Name: "c", Connector: nodes.TCP(c)}}
	aCfg.Routes = []petrel.RouteConfig{{Node: "b", Via: "c"}}
	r, err := a.Reconfigure(context.Background(), aCfg)
	if err != nil || !slices.Contains(r.Applied, "routes") || len(r.Restart) != 0 {
		t.Fatalf("reconfigure a: %+v %v", r, err)
	}
	wg.Wait()
	_, seen := drainBodies(t, b, "orders", numbered(total), a, c)
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s arrived %d times", k, n)
		}
	}
	if l := a.Links()[0]; l.NextHop != "c" {
		t.Fatalf("link still through %q after the route change", l.NextHop)
	}
	if st, _ := c.QueueStat("orders@b"); st.Enqueued == 0 {
		t.Fatal("nothing went through the relay")
	}
}

func TestReconfigureRefusesBadConfigAndReportsRestart(t *testing.T) {
	cfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet}
	a, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bad := cfg
	bad.Routes = []petrel.RouteConfig{{Node: "x", Via: "nowhere"}}
	if _, err := a.Reconfigure(context.Background(), bad); !errors.Is(err, petrel.ErrConfig) {
		t.Fatalf("bad config: %v", err)
	}
	next := cfg
	next.Listen = "127.0.0.1:0"
	next.Addresses = []petrel.AddressConfig{{Name: "new"}}
	r, err := a.Reconfigure(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Restart, []string{"listen"}) || !slices.Equal(r.Applied, []string{"addresses"}) {
		t.Fatalf("got %+v, want addresses applied and listen needing a restart", r)
	}
	if _, ok := a.QueueStat("new"); !ok {
		t.Fatal("new receive address not created")
	}
	if a.ListenAddr() != "" {
		t.Fatal("listen was half-applied")
	}
}

// TestReconfigureTurnsOnDiscovery: a node that starts without discovery
// is found by another once a reload turns discovery on.
func TestReconfigureTurnsOnDiscovery(t *testing.T) {
	disc := petrel.DiscoveryConfig{Enabled: true, Group: fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t)),
		Period: 50 * time.Millisecond, Timeout: 500 * time.Millisecond}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) { c.Discovery = disc }))
	bCfg := petrel.Config{Name: "b", DataDir: t.TempDir(), Logger: quiet, Listen: "127.0.0.1:0"}
	b, err := petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bCfg.Discovery = disc
	bCfg.Discovery.Advertise = "tcp://" + b.ListenAddr()
	r, err := b.Reconfigure(context.Background(), bCfg)
	if err != nil || !slices.Contains(r.Applied, "discovery") {
		t.Fatalf("reconfigure: %+v %v", r, err)
	}
	petreltest.Eventually(t, "b reachable through discovery", func() bool { return a.Reachable("b") }, func() string { return fmt.Sprintf("%+v", a.Directory()) })
	// b counts an announcement once its send returned, which may be after
	// a took it.
	petreltest.Eventually(t, "b's announcements counted", func() bool {
		st := b.Status()
		return st.Discovery.Enabled && st.Discovery.Sent > 0
	}, func() string { return fmt.Sprintf("%+v", b.Status().Discovery) })
}

// TestReconfigureLeavesUntouchedLinksUp: a reload that adds an address and
// a neighbour does not reset the link that is already up.
func TestReconfigureLeavesUntouchedLinksUp(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Open(t, nodes.Name("c"), nodes.Listen("127.0.0.1:0"))
	cfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet, Link: nodes.FastLinks,
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}}
	a, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := a.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@b")); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the message acked over the new link", func() bool { l := a.Links(); return len(l) == 1 && l[0].Acked == 1 }, func() string { return fmt.Sprintf("%+v", a.Links()) })
	cfg.Nodes = append(cfg.Nodes, petrel.NodeConfig{Name: "c", Connector: nodes.TCP(c)})
	cfg.Addresses = []petrel.AddressConfig{{Name: "extra"}}
	if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@b")); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the second message acked", func() bool { return a.Links()[0].Acked == 2 }, func() string { return fmt.Sprintf("%+v", a.Links()) })
	if l := a.Links()[0]; l.Reconnects != 0 || l.State != "connected" || b.ReceiverStats().Connections != 1 {
		t.Fatalf("the link to b was reset by an unrelated change: %+v, b saw %d connections", l, b.ReceiverStats().Connections)
	}
}

// TestReconfigureIsAllOrNothing makes Reconfigure fail on its last section,
// the outboxes: once on a folder that does not exist yet (found before
// anything is applied), once on one whose sent/ cannot be made (found
// while applying, after the neighbours, routes, auto_create and access
// rules of the same change were in force). Either way the node runs the
// configuration it had: none of the change is in force, and the same
// change, once the folder is fixed, applies whole and can be undone.
func TestReconfigureIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	base := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet,
		Addresses: []petrel.AddressConfig{{Name: "orders"}}}
	n, err := petrel.Open(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	outbox := filepath.Join(t.TempDir(), "out")
	next := base
	next.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}
	next.NoAutoCreate = true
	next.Access = []petrel.AccessRule{{Identity: "ops", Send: []string{"orders"}}}
	next.Outboxes = []petrel.OutboxConfig{{Dir: outbox, To: "orders"}}
	// runsBase checks that nothing of next is in force.
	checks := 0
	runsBase := func(when string) {
		t.Helper()
		checks++
		if err := n.Authorize("intruder", petrel.ActionSend, "orders"); err != nil {
			t.Errorf("%s: the access rules of the refused change are in force: %v", when, err)
		}
		m := n.Producer().CreateDataMessage("x@b")
		if err := n.Producer().Send(ctx, m); !errors.Is(err, petrel.ErrNoRoute) {
			t.Errorf("%s: send to the neighbour of the refused change: %v, want ErrNoRoute", when, err)
		}
		if err := n.Producer().Send(ctx, n.Producer().CreateDataMessage(fmt.Sprint("auto", checks))); err != nil {
			t.Errorf("%s: auto_create of the refused change is in force: %v", when, err)
		}
	}

	if _, err := n.Reconfigure(ctx, next); err == nil {
		t.Fatal("a change with a missing outbox folder applied")
	}
	runsBase("missing folder")

	if err := os.Mkdir(outbox, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outbox, "sent"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Reconfigure(ctx, next); err == nil {
		t.Fatal("a change whose outbox cannot make sent/ applied")
	}
	runsBase("sent/ not made")

	// Fixed, the same change applies whole, and the base undoes it all.
	if err := os.Remove(filepath.Join(outbox, "sent")); err != nil {
		t.Fatal(err)
	}
	r, err := n.Reconfigure(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"nodes", "auto_create", "access", "outboxes"} {
		if !slices.Contains(r.Applied, s) {
			t.Errorf("applied %v, want %s in it", r.Applied, s)
		}
	}
	if err := n.Authorize("intruder", petrel.ActionSend, "orders"); !errors.Is(err, petrel.ErrDenied) {
		t.Errorf("the applied rules: intruder %v, want ErrDenied", err)
	}
	if r, err := n.Reconfigure(ctx, base); err != nil || len(r.Applied) != 4 {
		t.Fatalf("back to the base: %+v %v, want nodes, auto_create, access and outboxes applied", r, err)
	}
	if err := n.Authorize("intruder", petrel.ActionSend, "orders"); err != nil {
		t.Errorf("back to the base: %v", err)
	}
}
