package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// These tests reach bounds through the surfaces a user or a peer touches
// (a remote client over TCP, discovery announcements over real UDP) and
// read the bound's metric from /metrics, as an operator would.

// TestAutoCreateCapThroughRemoteClient: with max_auto_queues 3, a remote
// client (petrel.Dial) makes undeclared queues by sending to them until
// the bound is reached. Past it, as the README's bounds table says, its send to a new
// undeclared address is refused with the reason (ErrRefused, naming the
// address and max_auto_queues), and so are its Consumer of a new address
// and its durable Subscribe ("a client's subscribe a refusal"). Each
// refusal counts in petrel_auto_create_refused_total; nothing is made of
// them; the same publish session, the queues already made and a declared
// address go on working.
func TestAutoCreateCapThroughRemoteClient(t *testing.T) {
	n := nodes.Open(t, nodes.Listen("127.0.0.1:0"), withTopics("orders.#"), nodes.With(func(c *petrel.Config) {
		c.MaxAutoQueues = 3
		withAdmin(c)
		c.Addresses = []petrel.AddressConfig{{Name: "declared", Role: address.RoleReceive}}
	}))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	const metric = "petrel_auto_create_refused_total"
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	p := c.Producer()
	send := func(dest, body string) error {
		m := p.CreateDataMessage(dest)
		m.Body = []byte(body)
		return p.Send(ctx, m)
	}
	// refused checks that err is the node's refusal of name for the bound.
	refused := func(what, name string, err error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), "max_auto_queues") || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Fatalf("%s past max_auto_queues: %v; want ErrRefused naming %q and max_auto_queues", what, err, name)
		}
	}
	// Fill the bound through the client: three queues. The node's own
	// topic inbox (topic:inbox, made because topics are configured) holds
	// none of the places; the fourth send is refused.
	var made []string
	var err error
	for i := 0; i <= 3; i++ {
		q := fmt.Sprint("q", i)
		if err = send(q, "first to "+q); err != nil {
			refused("send to "+q, q, err)
			break
		}
		made = append(made, q)
		if i == 0 {
			if got := scrape(t, n)[metric]; got != 0 {
				t.Fatalf("%s = %v before any refusal", metric, got)
			}
		}
	}
	if err == nil || len(made) != 3 {
		t.Fatalf("the client made %v, then %v; want three queues, then a refusal (queues %+v)", made, err, n.QueueStats())
	}
	late := fmt.Sprint("q", len(made)) // refused above
	t.Logf("the client made %v before the refusal of %s", made, late)
	_, err = c.Consumer("q9")
	refused("consumer of q9", "q9", err)
	_, err = c.Subscribe(ctx, "orders.#", petrel.SubscribeOptions{Name: "late", Durable: true})
	refused("durable subscribe", "sub:late", err)

	if got := scrape(t, n)[metric]; got != 3 {
		t.Fatalf("%s = %v after three refusals, want 3", metric, got)
	}
	for _, q := range []string{late, "q9", "sub:late"} {
		if _, ok := n.QueueStat(q); ok {
			t.Errorf("queue %s made past the bound", q)
		}
	}
	if subs := n.Subscriptions(); len(subs) != 0 {
		t.Errorf("subscriptions %+v made past the bound", subs)
	}

	// What was accepted is unharmed: the publish session that was refused
	// still sends, to a queue it made and to a declared address, and the
	// client consumes them, the earlier message first.
	if err := send("q0", "after the refusals"); err != nil {
		t.Fatalf("send to existing q0 after the refusals: %v", err)
	}
	if err := send("declared", "to declared"); err != nil {
		t.Fatalf("send to a declared address at the bound: %v", err)
	}
	take := func(addr string, want ...string) {
		t.Helper()
		con, err := c.Consumer(addr)
		if err != nil {
			t.Fatalf("consumer of %s at the bound: %v", addr, err)
		}
		defer con.Close()
		for _, w := range want {
			d, err := con.Receive(ctx)
			if err != nil {
				t.Fatalf("receive from %s: %v", addr, err)
			}
			if string(d.Body) != w {
				t.Fatalf("%s gave %q, want %q", addr, d.Body, w)
			}
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	take("q0", "first to q0", "after the refusals")
	for _, q := range made[1:] {
		take(q, "first to "+q)
	}
	take("declared", "to declared")
	if got := scrape(t, n)[metric]; got != 3 {
		t.Fatalf("%s = %v after using existing queues, want still 3", metric, got)
	}
}

// TestDiscoveryMaxNodesOverUDP: a node listens for discovery
// announcements broadcast on loopback (127.255.255.255, real UDP) with
// discovery.max_nodes 2. Two nodes announce themselves and are
// discovered; three more, announcing all the while, are dropped, and
// petrel_discovery_dropped_full_total in /metrics counts their
// announcements while petrel_discovery_nodes stays 2. The two known nodes
// keep refreshing past the discovery timeout, so the flood never pushes
// them out; when one of them stops, its room goes to a newcomer.
func TestDiscoveryMaxNodesOverUDP(t *testing.T) {
	const timeout = time.Second
	group := fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t))
	n := nodes.Open(t, nodes.Name("listener"), nodes.With(func(c *petrel.Config) {
		c.Discovery = petrel.DiscoveryConfig{Enabled: true, Group: group, Period: 50 * time.Millisecond, Timeout: timeout, MaxNodes: 2}
		withAdmin(c)
	}))
	announce := func(i byte) *address.Announcer {
		t.Helper()
		name := fmt.Sprintf("node-%d", i)
		cs, err := address.ParseConnectors(fmt.Sprintf("tcp://127.0.0.1:%d", 7400+int(i)))
		if err != nil {
			t.Fatal(err)
		}
		an, err := address.NewAnnouncer(address.DiscoveryConfig{Group: group, Period: 50 * time.Millisecond, Logger: quiet},
			address.AnnouncementFor(name, message.NodeID{0xd1, i}, cs))
		if err != nil {
			t.Fatal(err)
		}
		if err := an.Start(); err != nil {
			t.Skipf("announcing by broadcast on loopback is not available here: %v", err)
		}
		t.Cleanup(an.Stop)
		return an
	}
	discovered := func() map[string]address.Entry {
		out := map[string]address.Entry{}
		for _, e := range n.Directory() {
			if e.Source == address.SourceDiscovered {
				out[e.Name] = e
			}
		}
		return out
	}
	dirState := func() string { return fmt.Sprintf("%+v", n.Directory()) }

	announce(1)
	second := announce(2)
	petreltest.Eventually(t, "the first two nodes discovered", func() bool { return len(discovered()) == 2 }, dirState)
	for i := byte(3); i <= 5; i++ {
		announce(i)
	}
	const dropped, held = "petrel_discovery_dropped_full_total", "petrel_discovery_nodes"
	// Each of the three announces every 50 ms: well past 3 drops soon.
	petreltest.Eventually(t, "announcements of new nodes dropped", func() bool { return scrape(t, n)[dropped] >= 9 },
		func() string {
			m := scrape(t, n)
			return fmt.Sprintf("%s %v, %s %v; directory %s", dropped, m[dropped], held, m[held], dirState())
		})
	flooded := time.Now()

	// Past the timeout, with the flood going on, the known nodes are
	// still there and refreshed; none of the new ones got in.
	time.Sleep(timeout + timeout/2)
	got := discovered()
	if len(got) != 2 || got["node-1"].ID != (message.NodeID{0xd1, 1}) || got["node-2"].ID != (message.NodeID{0xd1, 2}) {
		t.Fatalf("directory past the bound: %s; want node-1 and node-2 only", dirState())
	}
	for _, name := range []string{"node-1", "node-2"} {
		if seen := got[name].LastSeen; !seen.After(flooded) {
			t.Errorf("%s last seen %v, not refreshed since the directory filled (%v)", name, seen, flooded)
		}
	}
	m := scrape(t, n)
	if m[held] != 2 || m[dropped] < 9 {
		t.Fatalf("%s = %v, %s = %v; want 2 and at least 9", held, m[held], dropped, m[dropped])
	}
	before := m[dropped]
	petreltest.Eventually(t, "the drops go on", func() bool { return scrape(t, n)[dropped] > before })

	// Room returns as a known node expires: node-2 stops, and one of the
	// newcomers takes its place; node-1 stays.
	second.Stop()
	petreltest.Eventually(t, "a newcomer in node-2's room", func() bool {
		got := discovered()
		_, one := got["node-1"]
		_, two := got["node-2"]
		return len(got) == 2 && one && !two
	}, dirState)
	if got := scrape(t, n)[held]; got != 2 {
		t.Fatalf("%s = %v after the newcomer, want 2", held, got)
	}
}

// TestDiscoveryDropsOnMetrics: a node with a secret drops the unsigned
// announcements of a forger, and petrel_discovery_dropped_total counts
// them under bad_mac in /metrics, where an operator can alert on forged
// traffic; the other reasons are there too, at 0.
func TestDiscoveryDropsOnMetrics(t *testing.T) {
	group := fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t))
	n := nodes.Open(t, nodes.Name("listener"), nodes.With(func(c *petrel.Config) {
		c.Secret = "network secret"
		c.Discovery = petrel.DiscoveryConfig{Enabled: true, Group: group, Period: 50 * time.Millisecond, Timeout: time.Second}
		withAdmin(c)
	}))
	cs, err := address.ParseConnectors("tcp://127.0.0.1:7401")
	if err != nil {
		t.Fatal(err)
	}
	an, err := address.NewAnnouncer(address.DiscoveryConfig{Group: group, Period: 50 * time.Millisecond, Logger: quiet},
		address.AnnouncementFor("forger", message.NodeID{0xf0, 1}, cs))
	if err != nil {
		t.Fatal(err)
	}
	if err := an.Start(); err != nil {
		t.Skipf("announcing by broadcast on loopback is not available here: %v", err)
	}
	t.Cleanup(an.Stop)
	const badMAC = `petrel_discovery_dropped_total{reason="bad_mac"}`
	petreltest.Eventually(t, "the forger's unsigned announcements counted", func() bool { return scrape(t, n)[badMAC] >= 3 },
		func() string { return fmt.Sprint(scrape(t, n)[badMAC]) })
	m := scrape(t, n)
	for _, reason := range []string{"malformed", "unusable", "stale"} {
		if v, ok := m[`petrel_discovery_dropped_total{reason="`+reason+`"}`]; !ok || v != 0 {
			t.Errorf("petrel_discovery_dropped_total{reason=%q} = %v (present %v), want 0", reason, v, ok)
		}
	}
	for _, e := range n.Directory() {
		if e.Name == "forger" {
			t.Fatalf("the unsigned announcement put %+v in the directory", e)
		}
	}
}
