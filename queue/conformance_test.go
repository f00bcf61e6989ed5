package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// TestConformance is the store's behaviour suite. Every case runs against
// receive and send queues, in both sync modes, and with a prefetch window
// small enough that the disk path (spill and refill) is exercised too.
func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind)
	}{
		{"RoundTrip", testRoundTrip},
		{"PriorityThenFIFO", testPriorityThenFIFO},
		{"SurvivesReopen", testSurvivesReopen},
		{"ConcurrentExactlyOnce", testConcurrentExactlyOnce},
		{"InFlightRedeliveredAfterReopen", testInFlightRedeliveredAfterReopen},
		{"LateUrgentMessageGoesFirst", testLateUrgentFirst},
	}
	variants := []struct {
		name string
		mod  func(*Config)
	}{
		{"full", nil},
		{"normal", func(c *Config) { c.Sync = SyncNormal }},
		{"tiny-prefetch", func(c *Config) { c.PrefetchMessages = 4; c.PrefetchBytes = 256 }},
		{"tiny-total-prefetch", func(c *Config) { c.PrefetchTotalBytes = 512 }},
	}
	for _, v := range variants {
		for _, kind := range []Kind{KindReceive, KindSend} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", v.name, kind, c.name), func(t *testing.T) {
					open := func(t *testing.T) (*Store, string) { return openTemp(t, v.mod) }
					c.fn(t, open, kind)
				})
			}
		}
	}
}

func testRoundTrip(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, _ := open(t)
	q := mustQueue(t, s, "orders", kind)
	m := msg(7, "hello")
	m.Properties.Set("n", message.Int32(42))
	mustPut(t, q, m)
	d, err := q.Poll()
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	got, err := d.Message()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, mustDecode(t, m)) {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	if d.Attempt != 1 || d.Priority != 7 {
		t.Fatalf("attempt %d priority %d, want 1 and 7", d.Attempt, d.Priority)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	st := q.Stats()
	if st.Depth != 0 || st.Enqueued != 1 || st.Acked != 1 || st.InFlight != 0 {
		t.Fatalf("stats after ack: %+v", st)
	}
	if _, err := q.Poll(); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("poll of empty queue: %v, want ErrNoMessage", err)
	}
}

func mustDecode(t *testing.T, m *message.Message) *message.Message {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := message.Decode(b, message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testPriorityThenFIFO(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, _ := open(t)
	q := mustQueue(t, s, "orders", kind)
	rng := rand.New(rand.NewPCG(1, 2))
	type sent struct {
		prio uint8
		seq  int
	}
	var all []sent
	// Concurrent puts in batches, so commits group several messages.
	for batch := 0; batch < 10; batch++ {
		var puts []Put
		for i := 0; i < 50; i++ {
			p := uint8(rng.IntN(10))
			seq := len(all)
			all = append(all, sent{p, seq})
			puts = append(puts, Put{Queue: q, Msg: msg(p, fmt.Sprintf("%d/%d", p, seq))})
		}
		op, err := s.Submit(puts)
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].prio > all[j].prio })
	want := make([]string, len(all))
	for i, a := range all {
		want[i] = fmt.Sprintf("%d/%d", a.prio, a.seq)
	}
	got := drain(t, q)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order differs:\n got %v\nwant %v", got[:20], want[:20])
	}
}

func testSurvivesReopen(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, path := open(t)
	q := mustQueue(t, s, "orders", kind)
	for i := 0; i < 100; i++ {
		mustPut(t, q, msg(uint8(i%3), fmt.Sprint(i)))
	}
	// Consume a few, then close with the rest on disk.
	for i := 0; i < 10; i++ {
		_, d := pollBody(t, q)
		d.Ack()
	}
	s.Close()
	s2 := openAt(t, path, nil)
	q2, ok := s2.Lookup("orders")
	if !ok {
		t.Fatal("queue lost on reopen")
	}
	if q2.Kind() != kind {
		t.Fatalf("kind %v after reopen, want %v", q2.Kind(), kind)
	}
	if st := q2.Stats(); st.Depth != 90 || st.Acked != 10 || st.Enqueued != 100 {
		t.Fatalf("stats after reopen: %+v", st)
	}
	if got := drain(t, q2); len(got) != 90 {
		t.Fatalf("got %d messages after reopen, want 90", len(got))
	}
}

func testConcurrentExactlyOnce(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, _ := open(t)
	q := mustQueue(t, s, "orders", kind)
	const producers, each, consumers = 8, 250, 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				if err := q.Put(ctx, msg(uint8(i%10), fmt.Sprintf("%d-%d", p, i)), false); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var cwg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		cwg.Go(func() {
			for {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n == producers*each {
					return
				}
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				d, err := q.Receive(rctx)
				rcancel()
				if err != nil {
					if ctx.Err() != nil {
						t.Error("timed out")
						return
					}
					continue
				}
				m, err := d.Message()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[string(m.Body)]++
				mu.Unlock()
				d.Ack()
			}
		})
	}
	wg.Wait()
	cwg.Wait()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
	if len(seen) != producers*each {
		t.Fatalf("got %d distinct messages, want %d", len(seen), producers*each)
	}
}

func testInFlightRedeliveredAfterReopen(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, path := open(t)
	q := mustQueue(t, s, "orders", kind)
	mustPut(t, q, msg(4, "a"))
	mustPut(t, q, msg(4, "b"))
	if b, _ := pollBody(t, q); b != "a" {
		t.Fatalf("got %q, want a", b)
	}
	s.Close() // "a" was in flight and never acked
	s2 := openAt(t, path, nil)
	q2, _ := s2.Lookup("orders")
	if got := drain(t, q2); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("after reopen got %v, want [a b]", got)
	}
}

func testLateUrgentFirst(t *testing.T, open func(t *testing.T) (*Store, string), kind Kind) {
	s, _ := open(t)
	q := mustQueue(t, s, "orders", kind)
	for i := 0; i < 50; i++ {
		mustPut(t, q, msg(4, fmt.Sprint(i)))
	}
	// Take a few, so the head is partly consumed, then send an urgent one.
	for i := 0; i < 3; i++ {
		_, d := pollBody(t, q)
		d.Ack()
	}
	mustPut(t, q, msg(9, "urgent"))
	if b, _ := pollBody(t, q); b != "urgent" {
		t.Fatalf("got %q, want the priority-9 message first", b)
	}
}
