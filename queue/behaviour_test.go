package queue

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func TestTTLExpiredNeverDelivered(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	short := msg(9, "short")
	short.TTL = time.Second
	long := msg(4, "long")
	long.TTL = time.Hour
	mustPut(t, q, short)
	mustPut(t, q, long)
	mustPut(t, q, msg(0, "forever"))
	clk.Advance(2 * time.Second)
	got := drain(t, q)
	if !reflect.DeepEqual(got, []string{"long", "forever"}) {
		t.Fatalf("got %v, want [long forever]", got)
	}
	settle(t, s)
	if st := q.Stats(); st.Expired != 1 || st.Depth != 0 {
		t.Fatalf("stats %+v, want 1 expired and depth 0", st)
	}
}

func TestTTLRemainingTimeOnDelivery(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	m := msg(4, "x")
	m.TTL = 10 * time.Second
	mustPut(t, q, m)
	clk.Advance(3 * time.Second)
	d, err := q.Poll()
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Message()
	if err != nil {
		t.Fatal(err)
	}
	if got.TTL != 7*time.Second {
		t.Fatalf("remaining TTL %v, want 7s", got.TTL)
	}
}

// A sweep expires messages stuck behind live ones, not only at the head.
func TestTTLSweepBehindLiveMessages(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	mustPut(t, q, msg(9, "live-head"))
	for i := 0; i < 5; i++ {
		m := msg(1, "doomed")
		m.TTL = time.Second
		mustPut(t, q, m)
	}
	clk.Advance(time.Minute)
	if err := s.Sweep(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if st := q.Stats(); st.Expired != 5 || st.Depth != 1 {
		t.Fatalf("after sweep %+v, want 5 expired, depth 1", st)
	}
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"live-head"}) {
		t.Fatalf("got %v", got)
	}
	settle(t, s)
	if st := q.Stats(); st.Expired != 5 {
		t.Fatalf("expired counted twice: %+v", st)
	}
}

func TestTTLExpiryAddress(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	q.SetPolicy(Policy{ExpiryAddress: "expired"})
	m := msg(4, "late")
	m.TTL = time.Second
	mustPut(t, q, m)
	clk.Advance(time.Minute)
	if err := s.Sweep(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	eq, ok := s.Lookup("expired")
	if !ok {
		t.Fatal("expiry queue not created")
	}
	b, d := pollBody(t, eq)
	if b != "late" || d.Reason != "expired" {
		t.Fatalf("got %q reason %q", b, d.Reason)
	}
	if st := q.Stats(); st.Expired != 1 || st.Depth != 0 {
		t.Fatalf("source stats %+v", st)
	}
}

func TestDedupe(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	m := msg(4, "once")
	for i := 0; i < 3; i++ {
		if err := q.Put(context.Background(), m, true); err != nil {
			t.Fatal(err)
		}
	}
	// A duplicate within one group commit is caught too.
	op, err := s.Submit([]Put{{Queue: q, Msg: m, Dedupe: true}, {Queue: q, Msg: msg(4, "other"), Dedupe: true}, {Queue: q, Msg: m, Dedupe: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !op.Deduped(0) || op.Deduped(1) || !op.Deduped(2) {
		t.Fatal("Deduped flags wrong")
	}
	// The record is persisted: after a restart, and after the original was
	// consumed, a resend is still dropped.
	drain(t, q)
	s.Close()
	s2 := openAt(t, path, nil)
	q2, _ := s2.Lookup("q")
	if err := q2.Put(context.Background(), m, true); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, q2); len(got) != 0 {
		t.Fatalf("resend after restart delivered: %v", got)
	}
	if st := q2.Stats(); st.Deduped != 5 || st.Enqueued != 2 {
		t.Fatalf("stats %+v, want 5 deduped and 2 enqueued", st)
	}
	// Dedupe is per queue.
	other := mustQueue(t, s2, "other", KindReceive)
	if err := other.Put(context.Background(), m, true); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, other); len(got) != 1 {
		t.Fatalf("same id in another queue: got %v", got)
	}
}

func TestDedupeWindowByCountAndAge(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) {
		c.Now = clk.Now
		c.DedupeMaxEntries = 10
		c.DedupeWindow = time.Hour
	})
	q := mustQueue(t, s, "q", KindReceive)
	var sent []*message.Message
	for i := 0; i < 30; i++ {
		m := msg(4, "x")
		sent = append(sent, m)
		if err := q.Put(context.Background(), m, true); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	if err := s.Sweep(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	// Past the count, the oldest are forgotten until a tenth of the room is
	// free: the newest 9 of 30 stay.
	if st := q.Stats(); st.DedupeEntries != 9 {
		t.Fatalf("dedupe window holds %d entries, want 9", st.DedupeEntries)
	}
	for i, m := range sent {
		op, _ := s.Submit([]Put{{Queue: q, Msg: m, Dedupe: true}})
		op.Wait(context.Background())
		if remembered := op.Deduped(0); remembered != (i >= 21) {
			t.Fatalf("message %d remembered=%v", i, remembered)
		}
	}
	// Everything is forgotten by age once the window passed.
	clk.Advance(2 * time.Hour)
	if err := s.Sweep(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	op, _ := s.Submit([]Put{{Queue: q, Msg: sent[29], Dedupe: true}})
	op.Wait(context.Background())
	if op.Deduped(0) {
		t.Fatal("record older than the window still deduped")
	}
}

func TestLeaseTimeoutRedelivers(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	q.SetPolicy(Policy{LeaseTimeout: 10 * time.Second})
	mustPut(t, q, msg(4, "x"))
	_, d1 := pollBody(t, q)
	if b, _ := pollBody(t, q); b != "" {
		t.Fatalf("in-flight message delivered twice: %q", b)
	}
	clk.Advance(11 * time.Second)
	if err := s.Sweep(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	b, d2 := pollBody(t, q)
	if b != "x" || d2.Attempt != 2 {
		t.Fatalf("redelivery %q attempt %v", b, d2)
	}
	if err := d1.Ack(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack of a timed-out lease: %v, want ErrLeaseLost", err)
	}
	if err := d2.Ack(); err != nil {
		t.Fatal(err)
	}
}

// A held lease does not time out; once touched it times out a
// LeaseTimeout after the touch, not after the delivery.
func TestHoldThenTouchStartsTheLease(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	q.SetPolicy(Policy{LeaseTimeout: 10 * time.Second})
	mustPut(t, q, msg(4, "x"))
	_, d1 := pollBody(t, q)
	if err := d1.Hold(); err != nil {
		t.Fatal(err)
	}
	sweep := func() {
		t.Helper()
		if err := s.Sweep(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	sweep()
	if b, _ := pollBody(t, q); b != "" {
		t.Fatalf("a held lease timed out: %q delivered again", b)
	}
	if err := d1.Touch(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(9 * time.Second)
	sweep()
	if b, _ := pollBody(t, q); b != "" {
		t.Fatalf("a lease timed out before LeaseTimeout after its touch: %q delivered again", b)
	}
	clk.Advance(2 * time.Second)
	sweep()
	if b, d2 := pollBody(t, q); b != "x" || d2.Attempt != 2 {
		t.Fatalf("after LeaseTimeout from the touch: %q %v, want the message again", b, d2)
	}
	if err := d1.Touch(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("touch of a lease that timed out: %v, want ErrLeaseLost", err)
	}
}

func TestNackBackoffThenDeadLetter(t *testing.T) {
	clk := newClock()
	s, path := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	q.SetPolicy(Policy{MaxDeliveries: 3, RedeliveryDelay: time.Second, MaxRedeliveryDelay: 10 * time.Second})
	mustPut(t, q, msg(4, "poison"))
	mustPut(t, q, msg(4, "fine"))
	_, d := pollBody(t, q)
	if err := d.Nack("bad input"); err != nil {
		t.Fatal(err)
	}
	// During the backoff the next message is served, not the nacked one.
	if b, d := pollBody(t, q); b != "fine" {
		t.Fatalf("got %q, want fine", b)
	} else {
		d.Ack()
	}
	if b, _ := pollBody(t, q); b != "" {
		t.Fatalf("nacked message came back before its backoff: %q", b)
	}
	clk.Advance(time.Second)
	_, d = pollBody(t, q)
	if d == nil || d.Attempt != 2 {
		t.Fatalf("second delivery: %+v", d)
	}
	d.Nack("bad input")
	clk.Advance(1500 * time.Millisecond) // backoff doubled to 2s
	if b, _ := pollBody(t, q); b != "" {
		t.Fatal("backoff did not double")
	}
	clk.Advance(time.Second)
	_, d = pollBody(t, q)
	if d == nil || d.Attempt != 3 {
		t.Fatalf("third delivery: %+v", d)
	}
	if err := d.Nack("still bad"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	dlq, ok := s.Lookup("q.dlq")
	if !ok {
		t.Fatal("dead-letter queue not created")
	}
	b, dd := pollBody(t, dlq)
	if b != "poison" || !strings.Contains(dd.Reason, "still bad") || !strings.Contains(dd.Reason, "3") {
		t.Fatalf("dead letter %q reason %q", b, dd.Reason)
	}
	if st := q.Stats(); st.DeadLettered != 1 || st.Depth != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The reason and the delivery count survive a restart.
	dd.Release()
	s.Close()
	s2 := openAt(t, path, func(c *Config) { c.Now = clk.Now })
	dlq2, _ := s2.Lookup("q.dlq")
	_, dd = pollBody(t, dlq2)
	if dd == nil || !strings.Contains(dd.Reason, "still bad") {
		t.Fatalf("reason lost on restart: %+v", dd)
	}
}

func TestDeliveryCountPersistedAcrossRestart(t *testing.T) {
	clk := newClock()
	s, path := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	mustPut(t, q, msg(4, "x"))
	_, d := pollBody(t, q)
	d.Nack("no")
	settle(t, s)
	s.Close()
	s2 := openAt(t, path, func(c *Config) { c.Now = clk.Now })
	q2, _ := s2.Lookup("q")
	if b, _ := pollBody(t, q2); b != "" {
		t.Fatal("backoff not kept across restart")
	}
	clk.Advance(time.Hour)
	_, d = pollBody(t, q2)
	if d == nil || d.Attempt != 2 {
		t.Fatalf("after restart: %+v, want attempt 2", d)
	}
}

func TestStoreFullError(t *testing.T) {
	s, _ := openTemp(t, func(c *Config) { c.MaxMessages = 3 })
	q := mustQueue(t, s, "q", KindReceive)
	for i := 0; i < 3; i++ {
		mustPut(t, q, msg(4, "x"))
	}
	if err := q.Put(context.Background(), msg(4, "over"), false); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("put past limit: %v, want ErrStoreFull", err)
	}
	_, d := pollBody(t, q)
	d.Ack()
	settle(t, s)
	if err := q.Put(context.Background(), msg(4, "fits"), false); err != nil {
		t.Fatalf("put after space freed: %v", err)
	}
	if st := q.Stats(); st.Depth != 3 {
		t.Fatalf("depth %d, want 3: the refused put must store nothing", st.Depth)
	}
}

func TestStoreFullBlocksUntilSpace(t *testing.T) {
	s, _ := openTemp(t, func(c *Config) { c.MaxBytes = 200; c.OnFull = FullBlock })
	q := mustQueue(t, s, "q", KindReceive)
	mustPut(t, q, msg(4, strings.Repeat("a", 100)))
	var wg sync.WaitGroup
	done := make(chan error, 1)
	wg.Go(func() { done <- q.Put(context.Background(), msg(4, strings.Repeat("b", 100)), false) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := q.Put(ctx, msg(4, strings.Repeat("c", 100)), false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put into a full store: %v, want it to block", err)
	}
	for i := 0; i < 3; i++ {
		d, err := q.Receive(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d.Ack()
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("blocked put: %v", err)
	}
}

func TestKindMismatch(t *testing.T) {
	s, _ := openTemp(t, nil)
	mustQueue(t, s, "q", KindReceive)
	if _, err := s.Queue(context.Background(), "q", KindSend); !errors.Is(err, ErrKindMismatch) {
		t.Fatalf("got %v, want ErrKindMismatch", err)
	}
}

func TestReceiveBlocksUntilPut(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	got := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		d, err := q.Receive(context.Background())
		if err != nil {
			got <- err.Error()
			return
		}
		m, _ := d.Message()
		got <- string(m.Body)
	})
	mustPut(t, q, msg(4, "wake"))
	wg.Wait()
	if b := <-got; b != "wake" {
		t.Fatalf("got %q", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Receive(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("receive with a cancelled ctx: %v", err)
	}
}

func TestReceiveReturnsOnClose(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	errc := make(chan error, 1)
	go func() { _, err := q.Receive(context.Background()); errc <- err }()
	s.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("receive after close: %v, want ErrClosed", err)
	}
	if err := q.Put(context.Background(), msg(4, "x"), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v, want ErrClosed", err)
	}
}

func TestGroupCommitSharesTransactions(t *testing.T) {
	s, _ := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	before := s.WriterStats()
	var ops []*Op
	for i := 0; i < 2000; i++ {
		op, err := s.Submit([]Put{{Queue: q, Msg: msg(4, "x")}})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	for _, op := range ops {
		if err := op.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	after := s.WriterStats()
	commits := after.Commits - before.Commits
	if commits >= 2000 || after.Requests-before.Requests != 2000 {
		t.Fatalf("%d commits for 2000 puts: no grouping", commits)
	}
	t.Logf("2000 puts in %d commits", commits)
}

func TestMeta(t *testing.T) {
	s, path := openTemp(t, nil)
	if v, err := s.Meta(context.Background(), "k"); err != nil || v != nil {
		t.Fatalf("missing key: %v %v", v, err)
	}
	if err := s.SetMeta(context.Background(), "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta(context.Background(), "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openAt(t, path, nil)
	if v, _ := s2.Meta(context.Background(), "k"); string(v) != "v2" {
		t.Fatalf("got %q", v)
	}
}

func TestBadPathIsClearError(t *testing.T) {
	_, err := Open(context.Background(), Config{Path: "/nonexistent-dir/x/petrel.db", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent-dir/x/petrel.db") {
		t.Fatalf("got %v, want an error naming the path", err)
	}
}

// A key twice in one batch stores once; and with a clock that stands still
// a resend in a later batch is still told from a new key.
func TestDedupeWithinBatchAndFrozenClock(t *testing.T) {
	clk := newClock() // never advanced
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	x, y := msg(4, "x"), msg(4, "y")
	op, err := s.Submit([]Put{{Queue: q, Msg: x, Dedupe: true}, {Queue: q, Msg: x, Dedupe: true}, {Queue: q, Msg: y, Dedupe: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if op.Deduped(0) || !op.Deduped(1) || op.Deduped(2) {
		t.Fatalf("deduped flags %v %v %v, want false true false", op.Deduped(0), op.Deduped(1), op.Deduped(2))
	}
	for i := 0; i < 3; i++ {
		op, _ := s.Submit([]Put{{Queue: q, Msg: y, Dedupe: true}, {Queue: q, Msg: msg(4, "new"), Dedupe: true}})
		op.Wait(context.Background())
		if !op.Deduped(0) || op.Deduped(1) {
			t.Fatalf("round %d: resend deduped=%v, new deduped=%v", i, op.Deduped(0), op.Deduped(1))
		}
	}
	if got := drain(t, q); len(got) != 5 {
		t.Fatalf("stored %v, want x, y and three new", got)
	}
}

func TestAckAllSettlesInOneRequest(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, func(c *Config) { c.Now = clk.Now })
	q := mustQueue(t, s, "q", KindReceive)
	q.SetPolicy(Policy{LeaseTimeout: time.Second})
	for i := 0; i < 5; i++ {
		mustPut(t, q, msg(4, "x"))
	}
	var ds []*Delivery
	for i := 0; i < 5; i++ {
		_, d := pollBody(t, q)
		ds = append(ds, d)
	}
	// The last lease times out and the message is taken again.
	ds[4].Release()
	_, again := pollBody(t, q)
	before := s.WriterStats().Requests
	if err := q.AckAll(ds); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("AckAll with a lost lease: %v, want ErrLeaseLost", err)
	}
	settle(t, s)
	if got := s.WriterStats().Requests - before; got != 2 { // the acks, and settle's own
		t.Fatalf("%d store requests, want one for the acks", got-1)
	}
	if st := q.Stats(); st.Depth != 1 || st.Acked != 4 {
		t.Fatalf("stats %+v, want 4 acked and the retaken one still there", st)
	}
	again.Ack()
}
