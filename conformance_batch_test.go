package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// conformBatch: ReceiveBatch and PollBatch take what is ready, up to their
// max and at least one, in order; each delivery of a batch settles on its
// own, and a nack in a batch is redelivered as Nack is anywhere.
func conformBatch(t *testing.T, k endpointKind) {
	_, ep := k.open(t, nil)
	c := consumer(t, ep, "orders")
	if _, err := c.PollBatch(8); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll batch of an empty address: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if ds, err := c.ReceiveBatch(ctx, 8); !errors.Is(err, context.DeadlineExceeded) || ds != nil {
		t.Fatalf("receive batch past its deadline: %v, %d deliveries", err, len(ds))
	}

	// A blocked ReceiveBatch returns once a message arrives.
	got := make(chan []*petrel.Delivery, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ds, _ := c.ReceiveBatch(ctx, 8)
		got <- ds
	}()
	epPublish(t, ep, "orders", "first")
	ds := <-got
	if len(ds) != 1 || string(ds[0].Body) != "first" {
		t.Fatalf("blocked receive batch got %s", bodies(ds))
	}
	if err := ds[0].Ack(); err != nil {
		t.Fatal(err)
	}

	const n = 10
	for i := range n {
		epPublish(t, ep, "orders", fmt.Sprint("m", i))
	}
	// The batches never exceed their max and keep the order; the third
	// message of all is nacked and comes back after the others.
	var order []string
	taken := 0
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for taken < n+1 {
		ds, err := c.ReceiveBatch(ctx, 4)
		if err != nil {
			t.Fatalf("receive batch after %d: %v", taken, err)
		}
		if len(ds) < 1 || len(ds) > 4 {
			t.Fatalf("a batch of %d, want 1 to 4", len(ds))
		}
		for _, d := range ds {
			taken++
			order = append(order, fmt.Sprintf("%s/%d", d.Body, d.Attempt))
			if taken == 3 {
				if err := d.Nack("retry"); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "[m0/1 m1/1 m2/1 m3/1 m4/1 m5/1 m6/1 m7/1 m8/1 m9/1 m2/2]"
	if fmt.Sprint(order) != want {
		t.Fatalf("took %v, want %s", order, want)
	}

	// A max below 1 takes one; PollBatch takes what is ready.
	for i := range 3 {
		epPublish(t, ep, "orders", fmt.Sprint("p", i))
	}
	ds, err := c.ReceiveBatch(ctx, 0)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "p0" {
		t.Fatalf("receive batch of max 0: %s, %v", bodies(ds), err)
	}
	ds[0].Ack()
	var polled []*petrel.Delivery
	petreltest.Eventually(t, "both messages ready to poll", func() bool {
		more, err := c.PollBatch(8)
		if err != nil && !errors.Is(err, petrel.ErrNoMessage) {
			t.Fatalf("poll batch: %v", err)
		}
		polled = append(polled, more...)
		return len(polled) == 2
	})
	if fmt.Sprint(bodies(polled)) != "[p1 p2]" {
		t.Fatalf("polled %s", bodies(polled))
	}
	for _, d := range polled {
		d.Ack()
	}
	if ds, err := c.PollBatch(8); !errors.Is(err, petrel.ErrNoMessage) {
		t.Fatalf("poll batch once all is acked: %s, %v", bodies(ds), err)
	}
}

// conformTopicBatch: a subscription's consumer takes its copies in batches.
func conformTopicBatch(t *testing.T, k endpointKind) {
	_, ep := openTopics(t, k)
	a := epSubscribe(t, ep, "orders.#", petrel.SubscribeOptions{Name: "a", Durable: true})
	b := epSubscribe(t, ep, "orders.eu.*", petrel.SubscribeOptions{})
	var want []string
	for i := range 6 {
		want = append(want, fmt.Sprint("m", i))
		epPublish(t, ep, "orders.eu.created", want[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []*petrel.Consumer{a, b} {
		var got []string
		for len(got) < len(want) {
			ds, err := c.ReceiveBatch(ctx, 100)
			if err != nil {
				t.Fatalf("%s: receive batch after %v: %v", c.Address(), got, err)
			}
			for _, d := range ds {
				got = append(got, string(d.Body))
				if err := d.Ack(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v, want %v", c.Address(), got, want)
		}
	}
}

func bodies(ds []*petrel.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}
