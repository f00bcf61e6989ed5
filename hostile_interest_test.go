package petrel_test

import (
	"fmt"
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
	mustRawPeer(t, n, "plant-7", "p", victim) // binds plant-7 to its id
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
