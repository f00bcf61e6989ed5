package queue

import (
	"context"
	"slices"
	"testing"
)

// A queue bounded by SetMaxDepth takes Optional puts (a topic
// subscription's copies) up to its bound and drops the rest, counted;
// the other queues of the same publishes get every copy, and the shared
// bodies of the dropped copies are kept only as long as a copy stored
// holds them. Puts that are not Optional are not bounded. Acking makes
// room again.
func TestMaxDepthDropsOptionalCopiesPastTheBound(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	b.SetMaxDepth(3)
	publish := func(from, n int, optional bool) {
		t.Helper()
		var puts []Put
		for i := from; i < from+n; i++ {
			m := msg(4, "m"+string(rune('a'+i)))
			data, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			puts = append(puts, Put{Queue: a, Msg: m, Data: data, Optional: optional}, Put{Queue: b, Msg: m, Data: data, Optional: optional})
		}
		op, err := s.Submit(puts)
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, 5, true) // one request: the bound holds within it
	publish(5, 1, true) // and across requests
	if st := b.Stats(); st.Depth != 3 || st.Overflowed != 3 || st.Enqueued != 3 {
		t.Fatalf("b: depth %d, overflowed %d, enqueued %d; want 3, 3, 3", st.Depth, st.Overflowed, st.Enqueued)
	}
	if st := a.Stats(); st.Depth != 6 || st.Overflowed != 0 {
		t.Fatalf("a: depth %d, overflowed %d; want 6, 0", st.Depth, st.Overflowed)
	}
	wantTables(t, s, 0, 9, 6)
	if got := drain(t, b); !slices.Equal(got, []string{"ma", "mb", "mc"}) {
		t.Fatalf("b holds %v, want the first three", got)
	}
	settle(t, s)        // the acks are committed
	publish(6, 1, true) // room again
	publish(7, 4, false)
	if st := b.Stats(); st.Depth != 5 || st.Overflowed != 3 {
		t.Fatalf("b after the acks: depth %d, overflowed %d; want 5 (1 copy, 4 puts not optional), 3", st.Depth, st.Overflowed)
	}
	if got := drain(t, a); len(got) != 11 {
		t.Fatalf("a holds %d messages, want every one of 11", len(got))
	}
	b.SetMaxDepth(0)
	publish(11, 1, true)
	if got := drain(t, b); !slices.Equal(got, []string{"mg", "mh", "mi", "mj", "mk", "ml"}) {
		t.Fatalf("b: %v", got)
	}
	if got := drain(t, a); !slices.Equal(got, []string{"ml"}) {
		t.Fatalf("a: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
	// The count was stored with the drops.
	s = openAt(t, path, nil)
	if st := mustQueue(t, s, "b", KindReceive).Stats(); st.Overflowed != 3 {
		t.Fatalf("b reopened: overflowed %d, want 3", st.Overflowed)
	}
}

// DeleteOverflowed deletes as Delete does, and counts what it deleted
// into Overflowed, which survives a restart; Delete counts nothing.
func TestDeleteOverflowedCountsTheDrops(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	var puts []Put
	for i := range 5 {
		m := msg(4, "m"+string(rune('a'+i)))
		data, _ := m.MarshalBinary()
		puts = append(puts, Put{Queue: q, Msg: m, Data: data})
	}
	submitWait(t, s, puts)
	ctx := context.Background()
	rows, err := q.OldestFree(ctx, 3)
	if err != nil || len(rows) != 3 {
		t.Fatalf("OldestFree(3) = %+v, %v", rows, err)
	}
	if n, err := q.DeleteOverflowed(ctx, rows[:2]); err != nil || n != 2 {
		t.Fatalf("DeleteOverflowed = %d, %v; want 2", n, err)
	}
	if n, err := q.Delete(ctx, rows[2:]); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v; want 1", n, err)
	}
	if st := q.Stats(); st.Depth != 2 || st.Overflowed != 2 {
		t.Fatalf("depth %d, overflowed %d; want 2, 2", st.Depth, st.Overflowed)
	}
	closeAndCheck(t, s, path)
	s = openAt(t, path, nil)
	q = mustQueue(t, s, "q", KindReceive)
	if st := q.Stats(); st.Depth != 2 || st.Overflowed != 2 {
		t.Fatalf("reopened: depth %d, overflowed %d; want 2, 2", st.Depth, st.Overflowed)
	}
	if got := drain(t, q); !slices.Equal(got, []string{"md", "me"}) {
		t.Fatalf("left %v, want the two newest", got)
	}
}

// OldestFree returns the oldest rows no consumer holds, whatever their
// priority: what a subscription that drops its oldest may delete.
func TestOldestFreeSkipsRowsInFlight(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	var puts []Put
	for i, prio := range []uint8{4, 4, 9, 4, 4} {
		m := msg(prio, "m"+string(rune('a'+i)))
		data, _ := m.MarshalBinary()
		puts = append(puts, Put{Queue: q, Msg: m, Data: data})
	}
	submitWait(t, s, puts)
	held := pollAll(t, q, 2) // mc (priority 9) and ma
	rows, err := q.OldestFree(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].RowID >= rows[1].RowID {
		t.Fatalf("OldestFree(2) = %+v, want two rows in id order", rows)
	}
	if n, err := q.Delete(context.Background(), rows); err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	for _, d := range held {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if got := drain(t, q); !slices.Equal(got, []string{"me"}) {
		t.Fatalf("left %v, want [me]: the two oldest not in flight (mb, md) deleted", got)
	}
	closeAndCheck(t, s, path)
}
