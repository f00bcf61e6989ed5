package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestReceiveBatchTakesWhatIsReady: a batch takes the ready messages in
// priority order, up to its limit, each under its own lease; an expired
// message met on the way is expired, not delivered, and the batch goes on
// past it at the next call.
func TestReceiveBatchTakesWhatIsReady(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	for i := range 3 {
		mustPut(t, q, msg(4, fmt.Sprint("a", i)))
	}
	short := msg(4, "short")
	short.TTL = time.Second
	mustPut(t, q, short)
	mustPut(t, q, msg(4, "b0"))
	mustPut(t, q, msg(9, "urgent"))
	clk.Advance(2 * time.Second)

	ctx := context.Background()
	var got []string
	var ds []*Delivery
	for len(got) < 5 {
		var err error
		n := len(ds)
		if ds, err = q.ReceiveBatch(ctx, ds, 2); err != nil {
			t.Fatal(err)
		}
		if k := len(ds) - n; k < 1 || k > 2 {
			t.Fatalf("a batch of %d, want 1 or 2", k)
		}
		for _, d := range ds[n:] {
			m, err := d.Message()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Body))
		}
	}
	if fmt.Sprint(got) != "[urgent a0 a1 a2 b0]" {
		t.Fatalf("took %v, want [urgent a0 a1 a2 b0]", got)
	}
	if st := q.Stats(); st.InFlight != 5 {
		t.Fatalf("%d in flight, want the 5 taken", st.InFlight)
	}
	// Each delivery settles on its own: the nacked one comes back.
	for i, d := range ds {
		if i == 1 {
			if err := d.Nack("again"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	again, err := q.PollBatch(nil, 10)
	if err != nil || len(again) != 1 {
		t.Fatalf("poll batch after a nack: %d, %v", len(again), err)
	}
	if m, _ := again[0].Message(); string(m.Body) != "a0" || again[0].Attempt != 2 {
		t.Fatalf("redelivered %q attempt %d, want a0 attempt 2", m.Body, again[0].Attempt)
	}
	again[0].Ack()
	if _, err := q.PollBatch(nil, 10); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("poll batch of an empty queue: %v", err)
	}
	settle(t, s)
	if st := q.Stats(); st.Expired != 1 || st.Depth != 0 {
		t.Fatalf("stats %+v, want 1 expired and depth 0", st)
	}
}

// TestReceiveBatchWaits: a batch blocks until a message is put, and ends
// with its context.
func TestReceiveBatchWaits(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ds, err := q.ReceiveBatch(ctx, nil, 8); !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
		t.Fatalf("receive batch of an empty queue: %d, %v", len(ds), err)
	}
	got := make(chan int, 1)
	go func() {
		ds, _ := q.ReceiveBatch(context.Background(), nil, 8)
		for _, d := range ds {
			d.Ack()
		}
		got <- len(ds)
	}()
	mustPut(t, q, msg(4, "late"))
	if n := <-got; n != 1 {
		t.Fatalf("a blocked batch took %d, want 1", n)
	}
}

// TestPollWithinLeavesWhatDoesNotFit: PollWithin and ReceiveWithin take
// the head only if its bytes fit in the room given; one that does not
// stays ready, untaken (not in flight, not on a next attempt), and is
// the next taken. An expired head is expired, not refused for its size.
func TestPollWithinLeavesWhatDoesNotFit(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	short := msg(4, "expires, and is larger than the room")
	short.TTL = time.Second
	mustPut(t, q, short)
	big, small := msg(4, string(make([]byte, 4096))), msg(4, "small")
	mustPut(t, q, big)
	mustPut(t, q, small)
	clk.Advance(2 * time.Second)

	if _, err := q.PollWithin(1024); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("poll within 1 KiB of a 4 KiB head: %v, want ErrTooLarge", err)
	}
	if st := q.Stats(); st.InFlight != 0 {
		t.Fatalf("after a refusal: %+v, want nothing in flight", st)
	}
	d, err := q.PollWithin(8192)
	if err != nil || d.RowID == 0 || len(d.Data) < 4096 || d.Attempt != 1 {
		t.Fatalf("poll within 8 KiB: %+v, %v, want the 4 KiB one on its first attempt", d, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := q.ReceiveWithin(ctx, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("receive within no room: %v, want ErrTooLarge", err)
	}
	if d, err = q.ReceiveWithin(ctx, 1024); err != nil || d.Attempt != 1 {
		t.Fatalf("receive within 1 KiB: %+v, %v", d, err)
	}
	if m, _ := d.Message(); m == nil || string(m.Body) != "small" {
		t.Fatalf("took %+v, want the small one", m)
	}
	// Nothing ready: it waits for the next, and takes it if it fits.
	go func() {
		time.Sleep(20 * time.Millisecond)
		mustPut(t, q, msg(4, "later"))
	}()
	if d, err = q.ReceiveWithin(ctx, 1024); err != nil {
		t.Fatalf("receive within 1 KiB, waiting: %v", err)
	}
	if m, _ := d.Message(); m == nil || string(m.Body) != "later" {
		t.Fatalf("waited for %+v", m)
	}
}
