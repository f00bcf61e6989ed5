package queue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// browseBodies decodes what Browse returns.
func browseBodies(t *testing.T, q *Queue, limit int) ([]string, []Browsed) {
	t.Helper()
	bs, err := q.Browse(context.Background(), limit)
	if err != nil {
		t.Fatalf("browse %q: %v", q.Name(), err)
	}
	var out []string
	for _, b := range bs {
		m, err := message.Decode(b.Data, message.Limits{})
		if err != nil {
			t.Fatalf("decode browsed row %d: %v", b.RowID, err)
		}
		out = append(out, string(m.Body))
	}
	return out, bs
}

// browseByBody browses q and maps each message's body to its row.
func browseByBody(t *testing.T, q *Queue) map[string]Browsed {
	t.Helper()
	bodies, rows := browseBodies(t, q, 0)
	out := make(map[string]Browsed, len(rows))
	for i, b := range bodies {
		out[b] = rows[i]
	}
	return out
}

// wantCounters checks q's depth and bytes against its rows, and its
// enqueued and acked counters.
func wantCounters(t *testing.T, q *Queue, depth, enqueued, acked int64) {
	t.Helper()
	_, rows := browseBodies(t, q, 0)
	var bytes int64
	for _, r := range rows {
		bytes += int64(len(r.Data))
	}
	st := q.Stats()
	if st.Depth != depth || int64(len(rows)) != depth || st.Bytes != bytes || st.Enqueued != enqueued || st.Acked != acked {
		t.Fatalf("%s: stats %+v with %d rows of %d bytes; want depth %d, enqueued %d, acked %d",
			q.Name(), st, len(rows), bytes, depth, enqueued, acked)
	}
}

func TestBrowse(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	mustPut(t, q, msg(4, "a"))
	mustPut(t, q, msg(9, "urgent"))
	mustPut(t, q, msg(4, "b"))
	mustPut(t, q, msg(4, "c"))
	_, leased := pollBody(t, q) // urgent
	_, nacked := pollBody(t, q) // a
	if err := nacked.Nack("later"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)

	got, rows := browseBodies(t, q, 0)
	if want := []string{"urgent", "a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("browse %v, want %v", got, want)
	}
	if !rows[0].InFlight || rows[0].Attempt != 1 || rows[0].Priority != 9 {
		t.Fatalf("leased row %+v", rows[0])
	}
	if rows[1].InFlight || rows[1].Attempt != 2 || rows[1].NotBefore.IsZero() {
		t.Fatalf("nacked row %+v, want attempt 2 and a backoff", rows[1])
	}
	if rows[2].InFlight || rows[2].Attempt != 1 {
		t.Fatalf("fresh row %+v", rows[2])
	}
	if got, _ := browseBodies(t, q, 2); !reflect.DeepEqual(got, []string{"urgent", "a"}) {
		t.Fatalf("browse with limit 2: %v", got)
	}
	// Browsing consumed nothing.
	if err := leased.Ack(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("after browse, drained %v", got)
	}
	s.Close()
	if _, err := q.Browse(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("browse of a closed store: %v", err)
	}
}

func TestPurge(t *testing.T) {
	clk := newClock()
	// A small window, so that most rows are on disk only.
	s, path := openTemp(t, func(c *Config) { c.Now = clk.Now; c.PrefetchMessages = 4 })
	q := mustQueue(t, s, "q", KindReceive)
	for i := range 20 {
		mustPut(t, q, msg(uint8(i%3), fmt.Sprint(i)))
	}
	_, leased := pollBody(t, q)
	_, nacked := pollBody(t, q)
	if err := nacked.Nack("later"); err != nil {
		t.Fatal(err)
	}
	n, err := q.Purge(context.Background())
	if err != nil || n != 19 {
		t.Fatalf("purge: %d, %v; want 19 (all but the leased one)", n, err)
	}
	wantCounters(t, q, 1, 20, 0)
	clk.Advance(time.Hour)
	if b, d := pollBody(t, q); d != nil {
		t.Fatalf("purged message %q delivered", b)
	}
	// The leased message is the consumer's still, and later puts are kept.
	if err := leased.Release(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, msg(0, "after"))
	if got := drain(t, q); len(got) != 2 || got[1] != "after" {
		t.Fatalf("after purge drained %v, want the leased message then after", got)
	}
	settle(t, s)
	wantCounters(t, q, 0, 21, 2)
	s.Close()
	q2, _ := openAt(t, path, nil).Lookup("q")
	wantCounters(t, q2, 0, 21, 2)
}

// A message whose ack is on its way to the writer is not purged: the ack
// deletes it and counts it.
func TestPurgeLeavesRowsBeingSettled(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	mustPut(t, q, msg(4, "acked"))
	mustPut(t, q, msg(4, "other"))
	_, d := pollBody(t, q)
	// What ack does, with the purge slipping in between its two steps.
	q.mu.Lock()
	l, err := q.take(d)
	q.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.Purge(context.Background()); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1", n, err)
	}
	if err := s.w.submit(&request{kind: reqAck, q: q, ref: refOf(l.e, l.prio)}); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	wantCounters(t, q, 0, 2, 1)
}

// Puts, consumers and purges at once: every message is consumed or
// purged, exactly once, and the counters match the table.
func TestPurgeConcurrent(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16 })
	q := mustQueue(t, s, "q", KindReceive)
	const producers, each = 4, 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen sync.Map
	var consumed, purged atomic.Int64
	var wg, consumers sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if err := q.Put(ctx, msg(uint8(i%10), fmt.Sprintf("%d-%d", p, i)), false); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			n, err := q.Purge(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			purged.Add(int64(n))
			time.Sleep(time.Millisecond)
		}
	})
	stop := make(chan struct{})
	for range 3 {
		consumers.Go(func() {
			for {
				d, err := q.Poll()
				if errors.Is(err, ErrNoMessage) {
					select {
					case <-stop:
						return
					default:
						time.Sleep(100 * time.Microsecond)
						continue
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				m, _ := d.Message()
				if _, dup := seen.LoadOrStore(string(m.Body), true); dup {
					t.Errorf("%s delivered twice", m.Body)
				}
				if err := d.Ack(); err != nil {
					t.Error(err)
				}
				consumed.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	consumers.Wait()
	settle(t, s)
	t.Logf("consumed %d, purged %d", consumed.Load(), purged.Load())
	if got := consumed.Load() + purged.Load(); got != producers*each {
		t.Fatalf("consumed %d + purged %d = %d, want %d", consumed.Load(), purged.Load(), got, producers*each)
	}
	wantCounters(t, q, 0, producers*each, consumed.Load())
	s.Close()
	q2, _ := openAt(t, path, nil).Lookup("q")
	wantCounters(t, q2, 0, producers*each, consumed.Load())
}

// deadLetters puts bodies into q and nacks each past MaxDeliveries 1.
func deadLetters(t *testing.T, s *Store, q *Queue, bodies []string) *Queue {
	t.Helper()
	q.SetPolicy(Policy{MaxDeliveries: 1})
	for _, b := range bodies {
		mustPut(t, q, msg(4, b))
	}
	for range bodies {
		_, d := pollBody(t, q)
		if err := d.Nack("bad"); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	dlq, ok := s.Lookup(q.Name() + DeadLetterSuffix)
	if !ok {
		t.Fatal("no dead-letter queue")
	}
	return dlq
}

func TestMove(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 2 })
	q := mustQueue(t, s, "orders", KindReceive)
	want := bodies("m", 6)
	dlq := deadLetters(t, s, q, want)
	got, rows := browseBodies(t, dlq, 0)
	if !reflect.DeepEqual(got, want) || !strings.Contains(rows[0].Reason, "bad") {
		t.Fatalf("dead letters %v (reason %q), want %v", got, rows[0].Reason, want)
	}
	_, leased := pollBody(t, dlq) // m0 stays in the dead-letter queue
	moves := make([]Move, len(rows))
	for i, r := range rows {
		moves[i] = Move{RowID: r.RowID, To: q}
	}
	n, err := dlq.Move(context.Background(), moves)
	if err != nil || n != 5 {
		t.Fatalf("move: %d, %v; want 5 (all but the one in flight)", n, err)
	}
	// Moving again moves nothing: the rows left.
	if n, err := dlq.Move(context.Background(), moves); err != nil || n != 0 {
		t.Fatalf("second move: %d, %v", n, err)
	}
	wantCounters(t, dlq, 1, 6, 0)
	wantCounters(t, q, 5, 11, 0)
	for i, b := range want[1:] {
		got, d := pollBody(t, q)
		if got != b || d.Attempt != 1 || d.Reason != "" {
			t.Fatalf("replayed %d: %q attempt %d reason %q, want %q attempt 1 and no reason", i, got, d.Attempt, d.Reason, b)
		}
		d.Ack()
	}
	if err := leased.Ack(); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	s.Close()
	s2 := openAt(t, path, nil)
	q2, _ := s2.Lookup("orders")
	dlq2, _ := s2.Lookup("orders.dlq")
	wantCounters(t, q2, 0, 11, 5)
	wantCounters(t, dlq2, 0, 6, 1)
}

func TestMoveRefusesBadTargets(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	other, _ := openTemp(t, nil)
	elsewhere := mustQueue(t, other, "q", KindReceive)
	for _, to := range []*Queue{nil, q, elsewhere} {
		if _, err := q.Move(context.Background(), []Move{{RowID: 1, To: to}}); err == nil {
			t.Fatalf("move to %v accepted", to)
		}
	}
}

// Consumers of a dead-letter queue and a replay at once: each dead letter
// is consumed there or moved, never both.
func TestMoveConcurrentWithConsumers(t *testing.T) {
	s, _ := openTemp(t, func(c *Config) { c.PrefetchMessages = 8 })
	q := mustQueue(t, s, "orders", KindReceive)
	dlq := deadLetters(t, s, q, bodies("m", 200))
	var consumed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := dlq.Poll()
				if errors.Is(err, ErrNoMessage) {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := d.Ack(); err != nil {
					t.Error(err)
				}
				consumed.Add(1)
			}
		})
	}
	var moved int
	for moved+int(consumed.Load()) < 200 {
		_, rows := browseBodies(t, dlq, 10)
		moves := make([]Move, len(rows))
		for i, r := range rows {
			moves[i] = Move{RowID: r.RowID, To: q}
		}
		n, err := dlq.Move(context.Background(), moves)
		if err != nil {
			t.Fatal(err)
		}
		moved += n
		settle(t, s)
	}
	close(stop)
	wg.Wait()
	settle(t, s)
	if moved+int(consumed.Load()) != 200 {
		t.Fatalf("moved %d + consumed %d, want 200", moved, consumed.Load())
	}
	wantCounters(t, dlq, 0, 200, consumed.Load())
	wantCounters(t, q, int64(moved), 200+int64(moved), 0)
}

// Each reads what Browse reads, in the same order and with the same
// marks, a page at a time: past eachRows rows and past eachBytes of
// messages a page ends, and rows moved out by fn between pages are
// neither missed nor seen twice.
func TestEach(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16 })
	a := mustQueue(t, s, "a", KindReceive)
	b := mustQueue(t, s, "b", KindReceive)
	other := mustQueue(t, s, "other", KindReceive)
	// More rows than a page holds: a run of one per put, then runs of
	// copies shared with b.
	const shared = 400
	for i := range eachRows + 50 {
		mustPut(t, a, msg(4, fmt.Sprint("p", i)))
	}
	var ms []*message.Message
	for i := range shared {
		ms = append(ms, msg(4, fmt.Sprint("m", i)))
	}
	if err := submitShared(t, ms, a, b).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Single puts at two more priorities, large ones past eachBytes.
	for i := range 10 {
		mustPut(t, a, msg(9, fmt.Sprint("u", i)))
	}
	big := strings.Repeat("x", 1<<20)
	for i := range 2 * eachBytes >> 20 {
		mustPut(t, a, msg(0, fmt.Sprint(i, big)))
	}
	_, leased := pollBody(t, a) // u0, in flight
	settle(t, s)

	want, err := a.Browse(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []Browsed
	if err := a.Each(context.Background(), func(r Browsed) bool {
		got = append(got, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Each gave %d messages, Browse %d; they differ", len(got), len(want))
	}
	if !got[0].InFlight || got[1].InFlight {
		t.Fatalf("in flight marks %v, %v; want the leased u0 alone", got[0].InFlight, got[1].InFlight)
	}

	// A page of large messages ends at eachBytes.
	page, _, more, err := a.browseRows(context.Background(), nil, 0, 0, page{rows: eachRows, msgs: -1, bytes: eachBytes})
	if err != nil || !more || len(page) != eachBytes>>20 {
		t.Fatalf("a page of 1 MiB messages: %d of them, more %v, %v; want %d and more", len(page), more, err, eachBytes>>20)
	}

	var calls int
	if err := a.Each(context.Background(), func(Browsed) bool { calls++; return calls < 3 }); err != nil || calls != 3 {
		t.Fatalf("Each stopped after %d calls, %v; want 3", calls, err)
	}

	// Moving what was read, while Each goes on, every 50 messages.
	seen := map[int64]bool{}
	var moves []Move
	flush := func() {
		if _, err := a.Move(context.Background(), moves); err != nil {
			t.Fatal(err)
		}
		moves = moves[:0]
	}
	if err := a.Each(context.Background(), func(r Browsed) bool {
		if seen[r.RowID] {
			t.Fatalf("row %d seen twice", r.RowID)
		}
		seen[r.RowID] = true
		if !r.InFlight {
			moves = append(moves, Move{RowID: r.RowID, To: other})
		}
		if len(moves) == 50 {
			flush()
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	flush()
	if len(seen) != len(want) {
		t.Fatalf("Each saw %d messages while moving them; want %d", len(seen), len(want))
	}
	if err := leased.Ack(); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if st := a.Stats(); st.Depth != 0 {
		t.Fatalf("a holds %d after everything was moved", st.Depth)
	}
	if st := other.Stats(); st.Depth != int64(len(want)-1) {
		t.Fatalf("other holds %d; want %d", st.Depth, len(want)-1)
	}
	if st := b.Stats(); st.Depth != shared {
		t.Fatalf("b holds %d; want its copies untouched", st.Depth)
	}
	closeAndCheck(t, s, path)
	if err := a.Each(context.Background(), func(Browsed) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Each on a closed store: %v", err)
	}
}

// Oldest and OldestRows find the messages stored first whatever their
// priority, among runs of copies as among rows of their own, reading
// the head of each priority only.
func TestOldest(t *testing.T) {
	s, _ := openTemp(t, nil)
	a := mustQueue(t, s, "a", KindReceive)
	b := mustQueue(t, s, "b", KindReceive)
	if _, ok, err := a.Oldest(context.Background()); ok || err != nil {
		t.Fatalf("Oldest of an empty queue: %v, %v", ok, err)
	}
	putShared(t, msg(4, "first"), a, b)
	mustPut(t, a, msg(9, "second"))
	if err := submitShared(t, []*message.Message{msg(0, "third"), msg(4, "fourth"), msg(9, "fifth")}, a, b).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	idOf := map[string]int64{}
	for body, r := range browseByBody(t, a) {
		idOf[body] = r.RowID
	}
	data, ok, err := a.Oldest(context.Background())
	if err != nil || !ok {
		t.Fatalf("Oldest: %v, %v", ok, err)
	}
	if m, err := message.Decode(data, message.Limits{}); err != nil || string(m.Body) != "first" {
		t.Fatalf("Oldest is %v (%v); want first", m, err)
	}
	rows, err := a.OldestRows(context.Background(), 3)
	var ids []int64
	var prios []uint8
	for _, r := range rows {
		ids, prios = append(ids, r.RowID), append(prios, r.Priority)
	}
	if want := []int64{idOf["first"], idOf["second"], idOf["third"]}; err != nil || !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(prios, []uint8{4, 9, 0}) {
		t.Fatalf("OldestRows(3) = ids %v, priorities %v, %v; want %v, [4 9 0]", ids, prios, err, want)
	}
	if rows, err := a.OldestRows(context.Background(), 10); err != nil || len(rows) != 5 || rows[0].Data != nil {
		t.Fatalf("OldestRows(10) = %d rows, %v; want all 5, without their data", len(rows), err)
	}
}

// Delete deletes chosen rows, copies and rows of their own alike: their
// queue's depth and bytes go down, a shared body goes with its last copy
// only, a row in flight stays, and the store checks whole after.
func TestDelete(t *testing.T) {
	s, path := openTemp(t, nil)
	a := mustQueue(t, s, "a", KindReceive)
	b := mustQueue(t, s, "b", KindReceive)
	putShared(t, msg(4, "shared-1"), a, b)
	putShared(t, msg(4, "shared-2"), a, b)
	mustPut(t, a, msg(9, "single"))
	mustPut(t, a, msg(0, "leased"))
	mustPut(t, a, msg(4, "kept"))
	// A row of its own: a dead letter.
	dead := mustQueue(t, s, "dead", KindReceive)
	mustPut(t, dead, msg(4, "to the dlq"))
	_, d := pollBody(t, dead)
	if err := d.DeadLetter("bad"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	dlq, ok := s.Lookup("dead" + DeadLetterSuffix)
	if !ok {
		t.Fatal("no dead-letter queue")
	}
	rows, err := dlq.Browse(context.Background(), 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("dead letters: %v, %v", rows, err)
	}
	if n, err := dlq.Delete(context.Background(), rows); err != nil || n != 1 {
		t.Fatalf("Delete the dead letter: %d, %v", n, err)
	}

	byBody := browseByBody(t, a)
	// Lease all five, then give back all but "leased".
	var leased *Delivery
	var others []*Delivery
	for range 5 {
		body, d := pollBody(t, a)
		if body == "leased" {
			leased = d
		} else {
			others = append(others, d)
		}
	}
	for _, d := range others {
		if err := d.Release(); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	del := []Browsed{byBody["shared-1"], byBody["single"], byBody["leased"], {RowID: 1 << 40}}
	del[1].Priority = 4 // a wrong priority costs a look at the others
	n, err := a.Delete(context.Background(), del)
	if err != nil || n != 2 {
		t.Fatalf("Delete: %d, %v; want the shared copy and the single one, not the leased one nor one that never was", n, err)
	}
	if err := leased.Ack(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, a); !slices.Equal(got, []string{"shared-2", "kept"}) {
		t.Fatalf("a holds %v after the delete; want [shared-2 kept]", got)
	}
	if got := drain(t, b); !slices.Equal(got, []string{"shared-1", "shared-2"}) {
		t.Fatalf("b holds %v; want its copies untouched", got)
	}
	wantTables(t, s, 0, 0, 0)
	for _, q := range []*Queue{a, b, dlq} {
		if st := q.Stats(); st.Depth != 0 || st.Bytes != 0 {
			t.Fatalf("%s: depth %d, bytes %d after everything went", q.Name(), st.Depth, st.Bytes)
		}
	}
	closeAndCheck(t, s, path)
}

// EachAfter from the key of any message gives the messages after it in
// Each's order, whether the key falls on a row of its own or inside a run
// of copies, on a priority's last message or on one moved out since.
// (TestAdminAPIBrowseDeepPageReadsPage shows that it reads from there.)
func TestEachAfter(t *testing.T) {
	s, _ := openTemp(t, nil)
	a := mustQueue(t, s, "a", KindReceive)
	b := mustQueue(t, s, "b", KindReceive)
	for i := range 20 {
		mustPut(t, a, msg(uint8(i%3*4), fmt.Sprint("p", i)))
	}
	var ms []*message.Message
	for i := range 300 { // runs of up to maxRunLen copies, priority 4
		ms = append(ms, msg(4, fmt.Sprint("m", i)))
	}
	if err := submitShared(t, ms, a, b).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		mustPut(t, a, msg(0, fmt.Sprint("q", i)))
	}
	ms = ms[:0]
	for i := range 70 { // copies alone at priority 9
		ms = append(ms, msg(9, fmt.Sprint("u", i)))
	}
	if err := submitShared(t, ms, a, b).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	ids := func(after Key) (out []int64) {
		t.Helper()
		if _, err := a.EachAfter(context.Background(), after, func(r Browsed) bool {
			out = append(out, r.RowID)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var all []Browsed
	if err := a.Each(context.Background(), func(r Browsed) bool { all = append(all, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 395 {
		t.Fatalf("Each gave %d messages, want 395", len(all))
	}
	if got := ids(Start); len(got) != len(all) {
		t.Fatalf("EachAfter(Start) gave %d messages, Each %d", len(got), len(all))
	}
	for i, r := range all {
		got := ids(r.Key())
		var want []int64
		for _, w := range all[i+1:] {
			want = append(want, w.RowID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after message %d (%+v): %d messages, want %d", i, r.Key(), len(got), len(want))
		}
	}
	// KeyAt(n) is where the nth starts, wherever it is: a priority of
	// copies alone, of messages alone, of both.
	for i := range all {
		k, ok, err := a.KeyAt(context.Background(), i)
		if err != nil || !ok {
			t.Fatalf("KeyAt(%d): %v, %v", i, ok, err)
		}
		if got := ids(k); len(got) != len(all)-i || got[0] != all[i].RowID {
			t.Fatalf("from KeyAt(%d), %+v: %d messages, want %d", i, k, len(got), len(all)-i)
		}
	}
	if _, ok, err := a.KeyAt(context.Background(), len(all)); ok || err != nil {
		t.Fatalf("KeyAt past the end: %v, %v", ok, err)
	}
	// A key whose message is gone still places the walk.
	mid := all[100]
	if _, err := a.Move(context.Background(), []Move{{RowID: mid.RowID, To: b}}); err != nil {
		t.Fatal(err)
	}
	if got := ids(mid.Key()); len(got) != len(all)-101 || got[0] != all[101].RowID {
		t.Fatalf("after a moved message: %d messages", len(got))
	}
	if got := ids(Key{Priority: 200}); len(got) != len(all)-1 {
		t.Fatalf("after a priority past the highest: %d messages, want every one", len(got))
	}
}
