package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// heldSize is the body of the messages the held-bytes tests send, and
// heldSlack what one such message takes encoded, past its body, at most.
const (
	heldSize  = 8 << 10
	heldSlack = 1 << 10
)

// sendLarge sends count messages of heldSize bytes to addr, each body
// starting with its number.
func sendLarge(t *testing.T, c *petrel.Client, addr string, count int) {
	t.Helper()
	p := c.Producer()
	for i := range count {
		m := p.CreateDataMessage(addr)
		m.Body = make([]byte, heldSize)
		copy(m.Body, fmt.Sprintf("%06d", i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// takeUnsettled takes what cons is given until nothing more comes for a while,
// without settling any of it.
func takeUnsettled(t *testing.T, cons *petrel.Consumer) []*petrel.Delivery {
	t.Helper()
	var ds []*petrel.Delivery
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		d, err := cons.Receive(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return ds
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		ds = append(ds, d)
	}
}

// A remote consumer that takes deliveries and never settles them holds no
// more than link.max_subscription_held_bytes of leased messages on the
// node (and one message past it at most: under the bound the next goes
// whatever its size), however many more wait and whatever credit it
// grants: the node waits for settles, and the metrics show the bytes held
// and the wait. Acking lets delivery go on, and every message comes.
func TestRemoteConsumerHeldBytesBound(t *testing.T) {
	const bound = 64 << 10
	const count = 120
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Link.MaxSubscriptionHeld = bound
	}))
	c := nodes.Dial(t, n, petrel.DialOptions{ConsumerWindow: 1024})
	sendLarge(t, c, "orders", count)
	cons := consumer(t, c, "orders")

	held := takeUnsettled(t, cons)
	m := scrape(t, n)
	if got := m["petrel_receiver_held_bytes"]; got > bound+heldSize+heldSlack || got < bound {
		t.Errorf("petrel_receiver_held_bytes = %v with %d deliveries taken, want at least the bound %d and at most one message past it", got, len(held), bound)
	}
	if got := m["petrel_receiver_held_waits_total"]; got < 1 {
		t.Errorf("petrel_receiver_held_waits_total = %v, want at least 1", got)
	}
	if most := bound/heldSize + 1; len(held) > most {
		t.Errorf("%d deliveries taken without a settle, want at most %d (%d bytes bound)", len(held), most, bound)
	}
	st, ok := n.QueueStat("orders")
	if !ok {
		t.Fatal("no queue orders")
	}
	if st.InFlight != int64(len(held)) || st.Depth != count {
		t.Errorf("queue: %d in flight, depth %d; want the %d taken in flight and all %d still stored", st.InFlight, st.Depth, len(held), count)
	}

	// Acking lets the rest come, and every message comes once.
	seen := map[string]bool{}
	ack := func(ds []*petrel.Delivery) {
		for _, d := range ds {
			seen[string(d.Body[:6])] = true
			if err := d.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	ack(held)
	for len(seen) < count {
		ds := takeUnsettled(t, cons)
		if len(ds) == 0 {
			t.Fatalf("nothing more delivered after %d of %d", len(seen), count)
		}
		if most := bound/heldSize + 1; len(ds) > most {
			t.Fatalf("%d deliveries taken without a settle, want at most %d", len(ds), most)
		}
		ack(ds)
	}
	petreltest.Eventually(t, "no bytes held once all is acked", func() bool {
		return scrape(t, n)["petrel_receiver_held_bytes"] == 0
	})
	petreltest.Eventually(t, "queue empty", func() bool {
		st, _ := n.QueueStat("orders")
		return st.Depth == 0 && st.InFlight == 0
	})
}

// link.max_held_bytes bounds the bytes every remote consumer together
// holds leased: two consumers that never settle, each far under its own
// bound, stop once together they hold it (and one message each past it
// at most), and go on once one of them acks.
func TestRemoteConsumersHeldBytesNodeBound(t *testing.T) {
	const bound = 64 << 10
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Link.MaxHeld = bound
	}))
	c := nodes.Dial(t, n, petrel.DialOptions{ConsumerWindow: 1024})
	sendLarge(t, c, "a", 50)
	sendLarge(t, c, "b", 50)
	ca, cb := consumer(t, c, "a"), consumer(t, c, "b")
	var ha, hb []*petrel.Delivery
	done := make(chan struct{})
	go func() { defer close(done); ha = takeUnsettled(t, ca) }()
	hb = takeUnsettled(t, cb)
	<-done
	m := scrape(t, n)
	if got := m["petrel_receiver_held_bytes"]; got > bound+2*(heldSize+heldSlack) {
		t.Errorf("petrel_receiver_held_bytes = %v, want at most one message each past %d", got, bound)
	}
	if len(ha)+len(hb) > bound/heldSize+2 {
		t.Errorf("%d and %d deliveries taken without a settle, want at most %d together", len(ha), len(hb), bound/heldSize+2)
	}
	if got := m["petrel_receiver_held_waits_total"]; got < 1 {
		t.Errorf("petrel_receiver_held_waits_total = %v, want at least 1", got)
	}
	for _, d := range append(ha, hb...) {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cons := range []*petrel.Consumer{ca, cb} {
		for range 2 { // delivered again, within the one-second look at the bound
			d := receive(t, cons)
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
