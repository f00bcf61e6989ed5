package queue

import (
	"context"
	"errors"
	"testing"
)

// TestDrop drops a queue with messages ready and in flight: they are gone
// from the store's totals, its waiters wake, the queue is gone after a
// reopen, and puts into it fail unless optional. Its neighbours are left
// alone.
func TestDrop(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "sub:a", KindReceive)
	other := mustQueue(t, s, "other", KindReceive)
	for _, b := range bodies("m", 3) {
		mustPut(t, q, msg(4, b))
	}
	mustPut(t, other, msg(4, "keep"))
	_, inflight := pollBody(t, q)
	waitErr := make(chan error, 1)
	q2 := mustQueue(t, s, "sub:b", KindReceive)
	go func() { _, err := q2.Receive(ctx); waitErr <- err }()

	for _, dq := range []*Queue{q, q2} {
		if _, err := s.Drop(ctx, dq); err != nil {
			t.Fatalf("drop %s: %v", dq.Name(), err)
		}
	}
	if err := <-waitErr; !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("Receive on a dropped queue = %v, want ErrUnknownQueue", err)
	}
	if n, _ := s.Drop(ctx, q); n != 0 {
		t.Fatalf("second drop deleted %d", n)
	}
	if err := inflight.Ack(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack after drop = %v, want ErrLeaseLost", err)
	}
	if _, ok := s.Lookup("sub:a"); ok {
		t.Fatal("dropped queue still found")
	}
	if msgs, _ := s.Totals(); msgs != 1 {
		t.Fatalf("store holds %d messages after the drop, want 1", msgs)
	}
	// A put into the dropped queue alone fails; beside an optional one,
	// the optional one is skipped and the rest stored.
	if err := q.Put(ctx, msg(4, "late"), false); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("put into dropped queue = %v, want ErrUnknownQueue", err)
	}
	op, err := s.Submit([]Put{{Queue: q, Msg: msg(4, "skip"), Optional: true}, {Queue: other, Msg: msg(4, "kept")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatalf("optional put into a dropped queue failed the op: %v", err)
	}
	if got := drain(t, other); len(got) != 2 || got[1] != "kept" {
		t.Fatalf("other = %v, want [keep kept]", got)
	}
	settle(t, s)
	s.Close()

	s = openAt(t, path, nil)
	if _, ok := s.Lookup("sub:a"); ok {
		t.Fatal("dropped queue back after reopen")
	}
	if msgs, _ := s.Totals(); msgs != 0 {
		t.Fatalf("reopened store holds %d messages, want 0", msgs)
	}
	// The name can be used again, for a fresh queue.
	q = mustQueue(t, s, "sub:a", KindReceive)
	if st := q.Stats(); st.Depth != 0 || st.Enqueued != 0 {
		t.Fatalf("recreated queue has stats %+v", st)
	}
}

// TestDropSameBatch drops a queue while puts into it are in the same group
// commit: nothing is left behind in the table.
func TestDropSameBatch(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "sub:x", KindReceive)
	var ops []*Op
	for i := 0; i < 50; i++ {
		op, err := s.Submit([]Put{{Queue: q, Msg: msg(4, "x"), Optional: true}})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if _, err := s.Drop(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if err := op.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if err := Check(ctx, path); err != nil {
		t.Fatalf("check after drop: %v", err)
	}
	s = openAt(t, path, nil)
	if msgs, _ := s.Totals(); msgs != 0 {
		t.Fatalf("store holds %d orphan messages", msgs)
	}
}
