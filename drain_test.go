package petrel_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
)

// numbered is the set of bodies "0" to "n-1", the bodies most tests send.
func numbered(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}

// drainBodies receives from addr on n, acking each delivery, until every
// body of sent arrived. It fails on a body that was never sent and on a
// body that arrives twice. It returns the deliveries in order and how many
// times each body arrived.
//
// Once all arrived, it checks that nothing more can come, rather than
// trusting one Poll: it waits until every link of the senders in from has
// nothing queued and nothing in flight (each message acked by the next
// hop, so no resend is left), then requires addr's queue to be empty. A
// duplicate stored by any hop would still be in it. Without from, the
// senders are clients or raw sessions whose Send returned once stored.
func drainBodies(t *testing.T, n *petrel.Node, addr string, sent []string, from ...*petrel.Node) ([]*petrel.Delivery, map[string]int) {
	t.Helper()
	want := make(map[string]bool, len(sent))
	for _, b := range sent {
		want[b] = true
	}
	c, err := n.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	seen := map[string]int{}
	var got []*petrel.Delivery
	for len(seen) < len(want) {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("received %d of %d distinct messages: %v\nlinks: %+v", len(seen), len(want), err, n.Links())
		}
		receivedOnce(t, d, want, seen)
		got = append(got, d)
	}
	petreltest.Eventually(t, "the senders' links empty, all acked by the next hop", func() bool {
		return linksSettled(from)
	}, func() string { return linksOf(from) })
	if d, err := c.Poll(); err == nil {
		t.Fatalf("extra delivery %q after all %d arrived and the senders settled", d.Body, len(want))
	}
	petreltest.Eventually(t, addr+" empty, nothing in flight", func() bool {
		st, ok := n.QueueStat(addr)
		return ok && st.Depth == 0 && st.InFlight == 0
	}, func() string { st, _ := n.QueueStat(addr); return fmt.Sprintf("%+v", st) })
	return got, seen
}

// receivedOnce records d, acks it, and fails the test if its body was not
// sent or already arrived.
func receivedOnce(t *testing.T, d *petrel.Delivery, want map[string]bool, seen map[string]int) {
	t.Helper()
	body := string(d.Body)
	if !want[body] {
		t.Fatalf("delivered %q, which was never sent", body)
	}
	if seen[body]++; seen[body] > 1 {
		t.Fatalf("%q arrived %d times", body, seen[body])
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack %q: %v", body, err)
	}
}

// linksSettled reports whether every link of every node has nothing
// queued and nothing in flight.
func linksSettled(from []*petrel.Node) bool {
	for _, n := range from {
		for _, l := range n.Links() {
			if l.Depth != 0 || l.InFlight != 0 {
				return false
			}
		}
	}
	return true
}

func linksOf(from []*petrel.Node) string {
	s := ""
	for _, n := range from {
		s += fmt.Sprintf("%s: %+v\n", n.Name(), n.Links())
	}
	return s
}

// bodiesOf is the set of bodies of ms.
func bodiesOf(ms []*message.Message) []string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m.Body)
	}
	return s
}
