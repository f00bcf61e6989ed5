package petrel_test

import (
	"context"
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

// forgeAnnouncements announces, unsigned, each name with a fresh id and
// an address nothing listens on, until the returned stop is called: what
// anyone on the broadcast domain can send to a node without a shared
// secret.
func forgeAnnouncements(t *testing.T, dc address.DiscoveryConfig, names []string) (stop func()) {
	t.Helper()
	cs, err := address.ParseConnectors("tcp://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var ans []*address.Announcer
	stop = func() {
		for _, an := range ans {
			an.Stop()
		}
		ans = nil
	}
	t.Cleanup(stop)
	for _, name := range names {
		id, err := message.NewNodeID()
		if err != nil {
			t.Fatal(err)
		}
		an, err := address.NewAnnouncer(dc, address.AnnouncementFor(name, id, cs))
		if err != nil {
			t.Fatal(err)
		}
		if err := an.Start(); err != nil {
			t.Skipf("discovery by broadcast is not available here: %v", err)
		}
		ans = append(ans, an)
	}
	return stop
}

// topicQueuesToward returns the topic send queues of n toward the nodes
// whose names start with prefix.
func topicQueuesToward(n *petrel.Node, prefix string) []string {
	var out []string
	for _, q := range n.QueueStats() {
		if strings.HasPrefix(q.Name, "_petrel.topics@"+prefix) {
			out = append(out, q.Name)
		}
	}
	return out
}

// TestForgedDiscoveryNamesLeaveNothing: without a shared secret,
// announcements are unsigned, and anyone can announce ever-new names.
// Each name found becomes a neighbour, which gets this node's topic
// interest through a send queue of its own, with a sender dialling it.
// Those are bounded by discovery.max_nodes while the names are in the
// directory, and dropped, senders stopped, once the names expire: waves
// of forged names leave no queue and no goroutine behind. A message an
// application sent to a forged name stays queued for it (a silent node is
// an outage).
func TestForgedDiscoveryNamesLeaveNothing(t *testing.T) {
	const maxNodes = 5
	group := fmt.Sprintf("127.255.255.255:%d", freeUDPPort(t))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Discovery = petrel.DiscoveryConfig{Enabled: true, Group: group, Period: 50 * time.Millisecond,
			Timeout: 400 * time.Millisecond, MaxNodes: maxNodes}
		c.Topics = []petrel.TopicConfig{{Pattern: "events.#"}}
		c.TopicInterestGrace = 500 * time.Millisecond // a janitor tick of 50ms
	}))
	if _, err := a.Subscribe(context.Background(), "events.#", petrel.SubscribeOptions{Name: "audit", Durable: true}); err != nil {
		t.Fatal(err)
	}
	const linkLoop = "sender.(*Sender).linkLoop"
	baseline := petreltest.GoroutinesIn(linkLoop)
	state := func() string {
		return fmt.Sprintf("directory %+v\nqueues %v\nsenders %d (baseline %d)", a.Directory(), topicQueuesToward(a, "f"),
			petreltest.GoroutinesIn(linkLoop), baseline)
	}
	for wave := range 3 {
		var names []string
		for i := range 2 * maxNodes {
			names = append(names, fmt.Sprintf("f%d-%d", wave, i))
		}
		stop := forgeAnnouncements(t, address.DiscoveryConfig{Group: group, Period: 50 * time.Millisecond, Timeout: 400 * time.Millisecond, Logger: quiet}, names)
		petreltest.Eventually(t, "the forged names of the wave greeted", func() bool {
			return len(topicQueuesToward(a, fmt.Sprintf("f%d-", wave))) > 0
		}, state)
		if wave == 0 {
			// An application's message to a forged name waits for it.
			e := a.Directory()[0]
			if err := a.Producer().Send(context.Background(), a.Producer().CreateDataMessage("orders@"+e.Name)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, q := range a.QueueStats() {
					if q.Name == "orders@"+e.Name && q.Depth == 1 {
						return
					}
				}
				t.Errorf("the message sent to %s is no longer queued: %+v", e.Name, a.QueueStats())
			})
		}
		// While the names are live, at most max_nodes of them hold a
		// queue and a sender.
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			if q, s := len(topicQueuesToward(a, "f")), petreltest.GoroutinesIn(linkLoop)-baseline; q > maxNodes || s > maxNodes+1 {
				t.Fatalf("wave %d: %d topic queues and %d senders toward forged names, past max_nodes %d\n%s", wave, q, s, maxNodes, state())
			}
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		petreltest.Eventually(t, "the forged names expired, and their queues and senders gone", func() bool {
			// One sender stays: that of the application's message.
			return len(a.Directory()) == 0 && len(topicQueuesToward(a, "f")) == 0 && petreltest.GoroutinesIn(linkLoop) <= baseline+1
		}, state)
	}
}
