package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// conformPriority sends messages of every priority, 0 to 9, in a shuffled
// order, all before the consumer opens; they must come out highest
// priority first, and within one priority in the order sent.
func conformPriority(t *testing.T, k endpointKind) {
	_, ep := k.open(t, nil)
	p := ep.Producer()
	const perPriority = 5
	var prios []uint8
	for pr := range uint8(10) {
		for range perPriority {
			prios = append(prios, pr)
		}
	}
	rand.Shuffle(len(prios), func(i, j int) { prios[i], prios[j] = prios[j], prios[i] })
	sent := map[uint8][]string{} // in send order, per priority
	for i, pr := range prios {
		m := p.CreateDataMessage("ranked")
		m.Priority = pr
		m.Body = []byte(fmt.Sprintf("p%d-%d", pr, i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		sent[pr] = append(sent[pr], string(m.Body))
	}
	c := consumer(t, ep, "ranked")
	for pr := 9; pr >= 0; pr-- {
		for _, want := range sent[uint8(pr)] {
			d := receive(t, c)
			if d.Priority != uint8(pr) || string(d.Body) != want {
				t.Fatalf("got %q priority %d, want %q priority %d", d.Body, d.Priority, want, pr)
			}
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d, err := c.Poll(); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll after all %d: %v %v", len(prios), d, err)
	}
}

// conformTTL sends a message whose TTL runs out before anyone consumes it,
// then one without TTL. The first is counted as expired and never
// delivered; the second is.
func conformTTL(t *testing.T, k endpointKind) {
	n, ep := k.open(t, nil)
	p := ep.Producer()
	short := p.CreateDataMessage("perishable")
	short.TTL = 50 * time.Millisecond
	short.Body = []byte("stale")
	if err := p.Send(context.Background(), short); err != nil {
		t.Fatal(err)
	}
	// The node's sweep (every 20ms here) removes it; no consumer looked.
	petreltest.Eventually(t, "the message counted as expired", func() bool {
		st, _ := n.QueueStat("perishable")
		return st.Expired == 1 && st.Depth == 0
	}, func() string { st, _ := n.QueueStat("perishable"); return fmt.Sprintf("%+v", st) })
	fresh := p.CreateDataMessage("perishable")
	fresh.Body = []byte("fresh")
	if err := p.Send(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, ep, "perishable")
	d := receive(t, c)
	if string(d.Body) != "fresh" {
		t.Fatalf("delivered %q, want only the message without TTL", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Poll(); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll after the fresh message: %q %v", d.Body, err)
	}
	if st, _ := n.QueueStat("perishable"); st.Expired != 1 {
		t.Fatalf("expired %d, want 1: %+v", st.Expired, st)
	}
}
