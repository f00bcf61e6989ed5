package petrel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// heldCount is how many leases c holds for its Close to give back.
func heldCount(c *Consumer) int {
	qc := c.b.(*queueConsumer)
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.count
}

// A local consumer holds the leases it handed out until they are settled,
// and forgets those whose lease timed out once it holds many: a caller
// that drops what it takes, leaving it to the lease timeout, does not make
// the consumer hold more and more.
func TestConsumerForgetsSettledAndTimedOutLeases(t *testing.T) {
	const lease = 200 * time.Millisecond
	n, err := Open(context.Background(), Config{Name: "a", DataDir: t.TempDir(), Logger: quietLog,
		Addresses: []AddressConfig{{Name: "jobs", Role: address.RoleReceive, Queue: queue.Policy{LeaseTimeout: lease}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p := n.Producer()
	for range 3 * minPrune {
		if err := p.SendAsync(p.CreateDataMessage("jobs")).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := n.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	take := func(k int) []*Delivery {
		var ds []*Delivery
		for len(ds) < k {
			batch, err := c.PollBatch(k - len(ds))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, batch...)
		}
		return ds
	}

	// Settled leases are forgotten at once.
	for _, d := range take(10) {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if got := heldCount(c); got != 0 {
		t.Fatalf("%d leases held after every delivery was acked", got)
	}

	// Dropped ones are held until their lease timed out and the consumer
	// holds twice as many as it kept at its last look.
	dropped := take(minPrune)
	if got := heldCount(c); got != minPrune {
		t.Fatalf("%d leases held, want the %d taken", got, minPrune)
	}
	time.Sleep(lease + 50*time.Millisecond)
	kept := take(minPrune)
	if got := heldCount(c); got != minPrune {
		t.Fatalf("%d leases held once the first %d timed out, want the %d taken since", got, minPrune, minPrune)
	}
	// A forgotten lease settles as it would have: the queue's lease
	// decides (timed out here, so lost, or still its own).
	if err := dropped[0].Ack(); err != nil && !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack of a forgotten delivery: %v", err)
	}
	for _, d := range kept {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if got := heldCount(c); got != 0 {
		t.Fatalf("%d leases held after the last were acked", got)
	}
}
