package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// openHourLease opens a node whose address jobs leases for an hour: a
// message can reach another consumer within a test's patience only if
// the consumer that took it settled it or gave it back.
func openHourLease(t *testing.T) *petrel.Node {
	return nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive,
			Queue: queue.Policy{LeaseTimeout: time.Hour}}}
	}))
}

// A local consumer's Close races a Receive that a send wakes: whichever
// wins, the message reaches a live consumer at once, at its first
// attempt, and what the closed consumer's Receive returned, if anything,
// was given back (settling it is ErrClosed).
func TestConsumerCloseRacesReceive(t *testing.T) {
	n := openHourLease(t)
	p := n.Producer()
	live, err := n.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	took := 0
	for i := range 300 {
		c, err := n.Consumer("jobs")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *petrel.Delivery, 1)
		go func() {
			d, err := c.Receive(context.Background())
			if err != nil && !errors.Is(err, petrel.ErrClosed) {
				t.Errorf("receive: %v", err)
			}
			got <- d
		}()
		m := p.CreateDataMessage("jobs")
		m.Body = fmt.Appendf(nil, "m-%d", i)
		// The commit wakes the blocked Receive as Wait returns: Close
		// races it, a little later each time.
		if err := p.SendAsync(m).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range i % 50 {
			runtime.Gosched()
		}
		c.Close()
		if d := <-got; d != nil {
			took++
			if err := d.Ack(); !errors.Is(err, petrel.ErrClosed) {
				t.Fatalf("iteration %d: ack of what the closed consumer took: %v, want ErrClosed", i, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := live.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("iteration %d: the live consumer did not get the message: %v", i, err)
		}
		if d.ID != m.ID || d.Attempt != 1 {
			t.Fatalf("iteration %d: live consumer got %d attempt %d, want %d attempt 1", i, d.ID, d.Attempt, m.ID)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the closed consumer's Receive took the message in %d of 300 races", took)
}

// Acks race a local consumer's Close: each delivery is either acked
// (Ack returns nil) or given back (Ack returns ErrClosed), never both nor
// neither, so another consumer gets exactly those given back.
func TestConsumerCloseRacesAcks(t *testing.T) {
	n := openHourLease(t)
	p := n.Producer()
	const total = 500
	for i := range total {
		m := p.CreateDataMessage("jobs")
		m.Body = fmt.Appendf(nil, "m-%d", i)
		if err := p.SendAsync(m).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := n.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	var ds []*petrel.Delivery
	for len(ds) < total {
		batch, err := c.PollBatch(64)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, batch...)
	}
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 4 {
				err := ds[i].Ack()
				switch {
				case err == nil:
					mu.Lock()
					acked[ds[i].ID] = true
					mu.Unlock()
				case !errors.Is(err, petrel.ErrClosed):
					t.Errorf("ack: %v", err)
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	c.Close()
	wg.Wait()
	other, err := n.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	back := 0
	for {
		d, err := other.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if acked[d.ID] {
			t.Fatalf("message %d acked before Close, and given back too", d.ID)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
		back++
	}
	if len(acked)+back != total {
		t.Fatalf("%d acked and %d given back, want %d in all", len(acked), back, total)
	}
	t.Logf("%d acked before Close, %d given back", len(acked), back)
}
