package queue

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// logRows counts the rows of the store's counter log, read beside it.
func logRows(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM counter_log`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCounterLog: commits that touch several queues log their counters'
// deltas, one row each, and fold them into the queues' rows every
// foldEvery rows; a store closed with rows in its log opens with every
// counter exact, and Check counts the log.
func TestCounterLog(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, nil)
	var qs []*Queue
	for i := range 5 {
		qs = append(qs, mustQueue(t, s, fmt.Sprintf("q%d", i), KindReceive))
	}
	putAll := func() {
		var puts []Put
		for _, q := range qs {
			puts = append(puts, Put{Queue: q, Msg: msg(4, "x")})
		}
		submitWait(t, s, puts)
	}
	for i := 1; i < foldEvery; i++ {
		putAll()
		if n := logRows(t, path); n != i {
			t.Fatalf("after %d commits to 5 queues: %d rows in the log, want %d", i, n, i)
		}
	}
	putAll() // the foldEvery-th folds
	if n := logRows(t, path); n != 0 {
		t.Fatalf("after %d commits: %d rows in the log, want it folded", foldEvery, n)
	}
	putAll()
	putAll()
	// One queue's acks alone update its row, beside the log.
	drain(t, qs[0])
	settle(t, s)
	if n := logRows(t, path); n != 2 {
		t.Fatalf("%d rows in the log, want 2", n)
	}
	want := func(q *Queue) Stats {
		st := q.Stats()
		st.InFlight = 0
		return st
	}
	before := map[string]Stats{}
	for _, q := range qs {
		before[q.name] = want(q)
	}
	if st := before["q0"]; st.Depth != 0 || st.Enqueued != foldEvery+2 || st.Acked != foldEvery+2 {
		t.Fatalf("q0: %+v", st)
	}
	if st := before["q1"]; st.Depth != foldEvery+2 || st.Enqueued != foldEvery+2 || st.Bytes == 0 {
		t.Fatalf("q1: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, path); err != nil {
		t.Fatalf("check with rows in the counter log: %v", err)
	}
	s = openAt(t, path, nil)
	if n := logRows(t, path); n != 0 {
		t.Fatalf("opened: %d rows in the log, want it folded", n)
	}
	for name, st := range before {
		q, _ := s.Lookup(name)
		if got := want(q); got != st {
			t.Errorf("%s reopened: %+v, want %+v", name, got, st)
		}
	}
}

// TestCounterLogDrop: a commit that drops a queue folds the log first, so
// that a new queue given the dropped one's id inherits none of its
// counters, now or after a reopen.
func TestCounterLogDrop(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, nil)
	a := mustQueue(t, s, "a", KindReceive)
	last := mustQueue(t, s, "last", KindReceive)
	for range 3 {
		submitWait(t, s, []Put{{Queue: a, Msg: msg(4, "x")}, {Queue: last, Msg: msg(4, "y")}})
	}
	if n := logRows(t, path); n != 3 {
		t.Fatalf("%d rows in the log, want 3", n)
	}
	id := last.id
	if _, err := s.Drop(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n := logRows(t, path); n != 0 {
		t.Fatalf("after a drop: %d rows in the log, want it folded", n)
	}
	again := mustQueue(t, s, "again", KindReceive)
	if again.id != id {
		t.Fatalf("the new queue has id %d, the dropped one had %d: the test needs the id given again", again.id, id)
	}
	submitWait(t, s, []Put{{Queue: a, Msg: msg(4, "x")}, {Queue: again, Msg: msg(4, "z")}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, path); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, nil)
	for name, enq := range map[string]int64{"a": 4, "again": 1} {
		q, _ := s.Lookup(name)
		if st := q.Stats(); st.Enqueued != enq || st.Depth != enq {
			t.Errorf("%s reopened: enqueued %d, depth %d; want %d", name, st.Enqueued, st.Depth, enq)
		}
	}
}

// FuzzCounterLog: whatever a log row holds, decoding it returns an error
// or sums, and never panics; what appendCounterDeltas wrote decodes to
// what it was given.
func FuzzCounterLog(f *testing.F) {
	f.Add(appendCounterDeltas(appendCounterDeltas(nil, 1, &counters{depth: 3, bytes: 300, enqueued: 3}), 2, &counters{depth: -1, acked: 1, overflowed: 7}))
	f.Add([]byte{})
	f.Add([]byte{0x01, 0xff})
	f.Fuzz(func(t *testing.T, row []byte) {
		sums := map[int64]*counters{}
		if err := decodeCounterLog(row, sums); err != nil {
			return
		}
		var again []byte
		for id, c := range sums {
			again = appendCounterDeltas(again, id, c)
		}
		back := map[int64]*counters{}
		if err := decodeCounterLog(again, back); err != nil {
			t.Fatalf("re-encoded sums do not decode: %v", err)
		}
		for id, c := range sums {
			if b := back[id]; b == nil || *b != *c {
				t.Fatalf("queue %d: %+v, decoded again %+v", id, c, b)
			}
		}
	})
}

// TestCounterLogFoldsManyQueues: a log that names foldQueues queues is
// folded by the next commit, however few its rows, so that no one fold
// updates more queues than that and a commit's share.
func TestCounterLogFoldsManyQueues(t *testing.T) {
	defer func(n int) { foldQueues = n }(foldQueues)
	foldQueues = 6
	s, path := openTemp(t, nil)
	var qs []*Queue
	for i := range 8 {
		qs = append(qs, mustQueue(t, s, fmt.Sprintf("q%d", i), KindReceive))
	}
	put := func(qs ...*Queue) {
		var puts []Put
		for _, q := range qs {
			puts = append(puts, Put{Queue: q, Msg: msg(4, "x")})
		}
		submitWait(t, s, puts)
	}
	put(qs[0], qs[1], qs[2])
	put(qs[3], qs[4], qs[5]) // the log names 6 queues now
	if n := logRows(t, path); n != 2 {
		t.Fatalf("%d rows in the log, want 2", n)
	}
	put(qs[6], qs[7])
	if n := logRows(t, path); n != 0 {
		t.Fatalf("a log naming %d queues: %d rows after the next commit, want it folded", foldQueues, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, nil)
	for _, q := range qs {
		r, _ := s.Lookup(q.name)
		if st := r.Stats(); st.Enqueued != 1 || st.Depth != 1 {
			t.Errorf("%s: enqueued %d, depth %d; want 1", q.name, st.Enqueued, st.Depth)
		}
	}
}
