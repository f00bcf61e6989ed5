package petrel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
)

// Loops from stale routing metadata (PITFALLS 14), through a real
// surface: a raw peer hands the node forwarded topic copies whose
// petrel.hops a correct neighbour never writes, as a node with stale
// routing metadata, an older build or a bug would.

// documentedMaxHops is the backstop on hops the README documents ("crossed
// 8 hops"): maxInterestHops. Spelled out here, not read from the code, so
// that a change of the bound fails this test until it is meant.
const documentedMaxHops = 8

// hopsCopy is a copy of a publish to orders.eu.created as a neighbour
// forwards it: destination the topic alone, hops the nodes it crossed.
func hopsCopy(origin message.NodeID, id uint64, body string, hops ...string) *message.Message {
	m := msg(origin, id, body)
	m.Destination = "orders.eu.created"
	m.Properties.Set(hopsProp, message.String(strings.Join(hops, ",")))
	return m
}

// chainOf names n made-up nodes that a copy crossed before x, x last.
func chainOf(n int) []string {
	hops := make([]string, 0, n)
	for i := 1; i < n; i++ {
		hops = append(hops, fmt.Sprintf("h%d", i))
	}
	return append(hops, "x")
}

// TestInterestHopsBackstop: hub and b are linked over TCP, each with a
// durable orders.# subscription; a raw peer x hands hub forwarded copies:
//   - with 1 hop, and with maxInterestHops-1 (7): hub delivers each to its
//     subscription and forwards it to b, with hub appended to the hops (b
//     gets hops of 2 and of 8), and b delivers it;
//   - with maxInterestHops (8): hub delivers it locally, as the last node
//     it may reach, but forwards it no further;
//   - whose hops name hub (y,hub,x): it went back to a node it visited, so
//     hub neither delivers nor forwards it;
//   - of hub's own publish, which hub delivered and forwarded already,
//     coming back (hops hub,x): neither delivered again nor forwarded.
//
// The three copies not forwarded (and the two not delivered) are counted
// in hub's petrel_topic_interest_dropped_total; hub's
// petrel_topic_forwarded_total counts the two it forwarded; no delivery
// carries petrel.hops.
func TestInterestHopsBackstop(t *testing.T) {
	m := newMesh(t, "hub", "b")
	hubLog, bLog := &copyLog{}, &copyLog{}
	hub := openTopicNode(t, m, "hub", []string{"b"}, hubLog)
	b := openTopicNode(t, m, "b", []string{"hub"}, bLog)
	atHub := subscribe(t, hub, "orders.#", petrel.SubscribeOptions{Name: "at-hub", Durable: true})
	atB := subscribe(t, b, "orders.#", petrel.SubscribeOptions{Name: "at-b", Durable: true})
	waitInterest(t, hub, "b/b/orders.#")
	waitInterest(t, b, "hub/hub/orders.#")

	// hub's own publish, delivered on both nodes once.
	own := publish(t, hub, "orders.eu.created", "own", nil)
	settleTopics(t, hub, b)
	if got := pollBodies(t, atHub); !slices.Equal(got, []string{"own"}) {
		t.Fatalf("hub's subscription got %q, want [own]", got)
	}
	if got := pollBodies(t, atB); !slices.Equal(got, []string{"own"}) {
		t.Fatalf("b's subscription got %q, want [own]", got)
	}
	hubLog.take()
	bLog.take()
	before := scrape(t, hub)

	x, y := nodeID("x"), nodeID("y")
	h1 := nodeID("h1")
	sess, err := mustRawPeer(t, hub, "x", "", x).Open(context.Background(), "_petrel.topics@hub", 100)
	if err != nil {
		t.Fatal(err)
	}
	refused := sendAll(t, sess,
		hopsCopy(x, 1, "one-hop", "x"),
		hopsCopy(h1, 1, "below-max", chainOf(documentedMaxHops-1)...),
		hopsCopy(h1, 2, "at-max", chainOf(documentedMaxHops)...),
		hopsCopy(y, 1, "via-hub", "y", "hub", "x"),
		hopsCopy(hub.ID(), own.ID, "own", "hub", "x"),
	)
	for i, r := range refused {
		if r != "" {
			t.Fatalf("copy %d refused on its header: %s", i, r)
		}
	}
	settleTopics(t, hub, b)

	if got, want := pollBodies(t, atHub), []string{"at-max", "below-max", "one-hop"}; !slices.Equal(got, want) {
		t.Errorf("hub's subscription got %q, want %q: the copies within the bound and the one at it, not those that name hub", got, want)
	}
	if got, want := pollBodies(t, atB), []string{"below-max", "one-hop"}; !slices.Equal(got, want) {
		t.Errorf("b's subscription got %q, want %q: what hub forwarded, not the copy at the bound nor those that name hub", got, want)
	}
	var atBHops []string
	for _, c := range bLog.take() {
		if c.from != "hub" {
			t.Errorf("b took a copy from %s: %+v", c.from, c)
		}
		atBHops = append(atBHops, c.hops)
	}
	slices.Sort(atBHops)
	want := []string{
		strings.Join(append(chainOf(documentedMaxHops-1), "hub"), ","),
		"x,hub",
	}
	slices.Sort(want)
	if !slices.Equal(atBHops, want) {
		t.Errorf("hub forwarded to b copies with hops %q, want %q: hub appended to the hops of the two within the bound", atBHops, want)
	}
	if got := hubLog.take(); len(got) != 5 {
		t.Errorf("hub took %d copies over its links, want x's 5 (none back from b): %+v", len(got), got)
	}

	after := scrape(t, hub)
	delta := func(k string) float64 { return after[k] - before[k] }
	if got := delta("petrel_topic_interest_dropped_total"); got != 3 {
		t.Errorf("hub's petrel_topic_interest_dropped_total rose by %v, want 3: the copy at the bound, and the two that name hub", got)
	}
	if got := delta("petrel_topic_forwarded_total"); got != 2 {
		t.Errorf("hub's petrel_topic_forwarded_total rose by %v, want 2: the copies within the bound", got)
	}
}
