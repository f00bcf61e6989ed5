package petrel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// leasedNode opens a node that serves clients, with address q whose
// leases time out after lease, and a message dead-lettered at its second
// delivery.
func leasedNode(t *testing.T, lease time.Duration) *petrel.Node {
	return nodes.Open(t, nodes.Listen("127.0.0.1:0"), nodes.With(func(cfg *petrel.Config) {
		cfg.Addresses = []petrel.AddressConfig{{Name: "q", Role: address.RoleReceive,
			Queue: queue.Policy{LeaseTimeout: lease, MaxDeliveries: 2}}}
	}))
}

// A remote consumer's window is pushed at once, and the application works
// through it for longer than a lease: the lease of each message starts
// when the application takes it, not when the node pushed it, so no
// message waiting in the client's buffer times out unseen, comes again,
// or is dead-lettered although its Ack returned nil.
func TestRemoteLeaseStartsWhenTaken(t *testing.T) {
	const (
		lease   = time.Second
		total   = 20
		handler = 150 * time.Millisecond // total*handler = 3 leases
	)
	n := leasedNode(t, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := n.Producer()
	for range total {
		if err := p.Send(ctx, p.CreateDataMessage("q")); err != nil {
			t.Fatal(err)
		}
	}
	c := nodes.Dial(t, n, petrel.DialOptions{})
	cons := consumer(t, c, "q")
	petreltest.Eventually(t, "the node pushed every message to the client", func() bool {
		st, _ := n.QueueStat("q")
		return st.InFlight == total
	})
	for i := range total {
		d, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if d.Attempt != 1 {
			t.Fatalf("message %d delivered again (attempt %d, %q) while it waited in the client's buffer", i, d.Attempt, d.Reason)
		}
		time.Sleep(handler) // the application's work
		if err := d.Ack(); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	petreltest.Eventually(t, "every message acked once", func() bool {
		n.Sync(ctx)
		st, _ := n.QueueStat("q")
		return st.Acked == total && st.Depth == 0
	}, func() string {
		st, _ := n.QueueStat("q")
		return fmt.Sprintf("%+v (a message in flight again was delivered twice; one dead-lettered was acked)", st)
	})
	if dl, _ := n.DeadLetters(ctx, "q", 10); len(dl) != 0 {
		t.Fatalf("%d acked messages dead-lettered: %+v", len(dl), dl[0])
	}
}

// A handler that takes a delivery and stalls past the lease loses it as a
// local consumer does: the node delivers the message again, although the
// client keeps back the credit of a lone take to batch it with others.
func TestRemoteStalledHandlerLosesTheLease(t *testing.T) {
	n := leasedNode(t, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := n.Producer()
	m := p.CreateDataMessage("q")
	m.Body = []byte("stalled")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	c := nodes.Dial(t, n, petrel.DialOptions{})
	cons := consumer(t, c, "q")
	d, err := cons.Receive(ctx)
	if err != nil || string(d.Body) != "stalled" {
		t.Fatalf("receive: %v %v", d, err)
	}
	// The handler never settles d.
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	defer rcancel()
	again, err := cons.Receive(rctx)
	if err != nil || string(again.Body) != "stalled" || again.Attempt != 2 {
		t.Fatalf("the message of a stalled handler after its lease: %v %v", again, err)
	}
	if err := again.Ack(); err != nil {
		t.Fatal(err)
	}
}
