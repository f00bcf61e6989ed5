package petrel_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
)

// interestMsg is topic interest as a neighbour announces it: a data
// message to the reserved address, authored by origin, naming node as the
// subscriber and hops as the nodes it crossed.
func interestMsg(origin message.NodeID, id uint64, node, hops string) *message.Message {
	m := &message.Message{ID: id, Origin: origin, Destination: "_petrel.topics", Kind: message.KindData,
		Priority: 4, Timestamp: time.Now()}
	m.Data.DataType = "petrel.interest"
	m.Properties.Set("petrel.op", message.String("subscribe"))
	m.Properties.Set("petrel.pattern", message.String("orders.#"))
	m.Properties.Set("petrel.durable", message.Bool(true))
	m.Properties.Set("petrel.node", message.String(node))
	m.Properties.Set("petrel.hops", message.String(hops))
	return m
}

// TestHostileInterestInAnotherName: a neighbour may announce topic
// interest only as itself. Interest under another node's origin is
// refused; interest under its own origin that names another neighbour as
// where it came from is dropped, so that no peer can draw another's
// traffic, or withdraw another's subscriptions. Its own interest is learned.
func TestHostileInterestInAnotherName(t *testing.T) {
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = []petrel.PeerConfig{{Name: "mallory", Secret: "m"}, {Name: "plant-7", Secret: "p"}}
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#"}}
	})
	mallory, victim := nodeID("mallory"), nodeID("plant-7")
	openLink(t, mustRawPeer(t, n, "plant-7", "p", victim)) // its first link binds plant-7 to its id
	sess := openLink(t, mustRawPeer(t, n, "mallory", "m", mallory))
	got := sendAll(t, sess,
		interestMsg(victim, 1, "plant-7", "plant-7"),
		interestMsg(mallory, 2, "plant-7", "plant-7"),
		interestMsg(mallory, 3, "mallory", "mallory"))
	if !strings.Contains(got[0], "origin") {
		t.Fatalf("interest under the victim's origin: %q, want a refusal", got[0])
	}
	if got[1] != "" || got[2] != "" {
		t.Fatalf("interest under mallory's own origin refused: %q", got[1:])
	}
	learned := func() string { return fmt.Sprintf("%+v", n.TopicInterest()) }
	petreltest.Eventually(t, "mallory's own interest learned", func() bool {
		return len(n.TopicInterest()) > 0
	}, learned)
	petreltest.Eventually(t, "the topic inbox drained", func() bool {
		st, _ := n.QueueStat("topic:inbox")
		return st.Depth == 0
	}, learned)
	for _, in := range n.TopicInterest() {
		if in.Neighbour != "mallory" || in.Node != "mallory" {
			t.Fatalf("interest learned in another's name: %s", learned())
		}
	}
}

// TestHostileInterestPastSubscribeRules: interest is learned only for
// patterns the neighbour that hands it over may subscribe to. Interest
// past its subscribe rules is refused with the reason (logged, counted in
// petrel_topic_interest_denied_total and the access denials), and draws
// no publish; what it may subscribe to is learned.
func TestHostileInterestPastSubscribeRules(t *testing.T) {
	logs := &petreltest.SyncBuffer{}
	n := openNode(t, "hub", "127.0.0.1:0", func(c *petrel.Config) {
		c.Peers = []petrel.PeerConfig{{Name: "mallory", Secret: "m"}}
		c.Topics = []petrel.TopicConfig{{Pattern: "orders.#"}}
		c.Access = []petrel.AccessRule{{Identity: "mallory", Send: []string{"_petrel.topics"}, Subscribe: []string{"orders.eu.*"}}}
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		withAdmin(c)
	})
	mallory := nodeID("mallory")
	sess := openLink(t, mustRawPeer(t, n, "mallory", "m", mallory))
	wide := interestMsg(mallory, 1, "mallory", "mallory")
	narrow := interestMsg(mallory, 2, "mallory", "mallory")
	narrow.Properties.Set("petrel.pattern", message.String("orders.eu.*"))
	if got := sendAll(t, sess, wide, narrow); got[0] != "" || got[1] != "" {
		t.Fatalf("interest refused on its header: %q", got)
	}
	petreltest.Eventually(t, "the topic inbox drained", func() bool {
		st, _ := n.QueueStat("topic:inbox")
		return st.Depth == 0 && st.InFlight == 0 && len(n.TopicInterest()) == 1
	}, func() string { return fmt.Sprintf("%+v", n.TopicInterest()) })
	if got := n.TopicInterest()[0]; got.Pattern != "orders.eu.*" || got.Node != "mallory" {
		t.Fatalf("learned %+v, want mallory's orders.eu.* alone", got)
	}
	m := scrape(t, n)
	if m["petrel_topic_interest_denied_total"] != 1 || m[`petrel_access_denied_total{action="subscribe"}`] != 1 {
		t.Fatalf("denied: topic %v, access %v; want 1 and 1", m["petrel_topic_interest_denied_total"], m[`petrel_access_denied_total{action="subscribe"}`])
	}
	if s := logs.String(); !strings.Contains(s, "refusing topic interest") || !strings.Contains(s, `may not subscribe`) || !strings.Contains(s, "orders.#") {
		t.Fatalf("the refusal's reason is not logged:\n%s", s)
	}
}
