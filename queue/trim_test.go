package queue

import (
	"context"
	"testing"
	"time"
)

// TestIdleWriterTrimsBurstBuffers checks that what a burst grew, in the
// writer and in a queue, is given back once the store is idle: a node
// with thousands of send queues must not keep, per queue, the memory of
// its largest burst.
func TestIdleWriterTrimsBurstBuffers(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "burst", KindReceive)
	const n = 1000
	puts := make([]Put, n)
	for i := range puts {
		puts[i] = Put{Queue: q, Msg: msg(4, "m")}
	}
	op, err := s.Submit(puts)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	grown := cap(q.lv[4].ready)
	q.mu.Unlock()
	if grown == 0 {
		t.Fatal("the burst was not held in memory; the test proves nothing")
	}
	var ds []*Delivery
	for range n {
		d, err := q.Poll()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if err := q.AckAll(ds); err != nil {
		t.Fatal(err)
	}
	settle(t, s)

	deadline := time.Now().Add(10 * idleTrim)
	for {
		q.mu.Lock()
		ready, inflight, spare := cap(q.lv[4].ready), len(q.inflight), cap(q.spareAcks)
		q.mu.Unlock()
		if ready == 0 && inflight == 0 && spare == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle for %v, the queue still holds an array of %d entries, %d leases and a spare array of %d acks", 10*idleTrim, ready, inflight, spare)
		}
		time.Sleep(idleTrim / 5)
	}
	// The queue works on after a trim, and so does the writer.
	mustPut(t, q, msg(4, "after"))
	if got := drain(t, q); len(got) != 1 || got[0] != "after" {
		t.Fatalf("after the trim the queue gave %q", got)
	}
	settle(t, s)
	if got, want := q.Stats().Depth, int64(0); got != want {
		t.Fatalf("depth %d, want %d", got, want)
	}
}
