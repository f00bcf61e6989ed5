package queue

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestPrefetchTotalBounded fills many queues past the store's prefetch
// budget: what they hold ready stays within it (a refill may pass it by
// minRefill entries, so that a queue is never left with none), every
// message still comes out in order, and the budget is given back by
// consumption, purge and drop alike.
func TestPrefetchTotalBounded(t *testing.T) {
	const (
		queues  = 12
		per     = 300
		bodyLen = 20
	)
	cost := int64(bodyLen + 60 + entrySize) // 60: more than an encoded message's header here
	limit := 50 * cost
	s, _ := openTemp(t, func(c *Config) { c.PrefetchTotalBytes = int(limit) })
	if _, l := s.Prefetched(); l != limit {
		t.Fatalf("limit %d, want %d", l, limit)
	}
	qs := make([]*Queue, queues)
	want := make([][]string, queues)
	for i := range qs {
		qs[i] = mustQueue(t, s, fmt.Sprintf("q%d", i), KindReceive)
		var puts []Put
		for j := range per {
			b := fmt.Sprintf("q%02d-%016d", i, j)
			want[i] = append(want[i], b)
			puts = append(puts, Put{Queue: qs[i], Msg: msg(4, b)})
		}
		submitWait(t, s, puts)
	}
	held, _ := s.Prefetched()
	if held > limit {
		t.Fatalf("after the puts the queues hold %d ready, over the bound %d", held, limit)
	}
	if held == 0 {
		t.Fatal("nothing held ready: the budget was not counted")
	}

	// Consume from every queue in turn, a few at a time, so that each
	// refills while the others hold their share.
	got := make([][]string, queues)
	slack := int64(minRefill) * cost
	for round := 0; ; round++ {
		progress := false
		for i, q := range qs[:queues-2] {
			for range 7 {
				b, d := pollBody(t, q)
				if d == nil {
					break
				}
				if err := d.Ack(); err != nil {
					t.Fatal(err)
				}
				got[i] = append(got[i], b)
				progress = true
			}
			if h, _ := s.Prefetched(); h > limit+slack*int64(queues) {
				t.Fatalf("round %d: %d held ready, bound %d", round, h, limit)
			}
		}
		if !progress {
			break
		}
	}
	for i := range queues - 2 {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("queue %d: got %d messages, want %d in order", i, len(got[i]), len(want[i]))
		}
	}
	// The last two go by purge and by drop.
	if n, err := qs[queues-2].Purge(context.Background()); err != nil || n != per {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if n, err := s.Drop(context.Background(), qs[queues-1]); err != nil || n != per {
		t.Fatalf("drop: %d, %v", n, err)
	}
	settle(t, s)
	if h, _ := s.Prefetched(); h != 0 {
		t.Fatalf("everything consumed, purged or dropped, and %d still counted ready", h)
	}
}
