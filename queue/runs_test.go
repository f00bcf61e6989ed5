package queue

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func TestRunEncodingRoundTrip(t *testing.T) {
	items := []runItem{
		{id: 10, body: 9, size: 128},
		{id: 12, body: 9, size: 128, exp: 1_800_000_000_000_000_000},
		{id: 400, body: 300, size: 1 << 20, deliv: 3, notBf: 1_800_000_000_000_000_001},
	}
	b := encodeRun(nil, items)
	// The layout drawn in runs.go, byte for byte: it is on disk in every
	// store, so a change needs a migration.
	const golden = "03" + "0a01800100" + "0000" + "0203800180" + "80d09de9ceb8fd18" + "0000" +
		"8403648080400003" + "8180d09de9ceb8fd18"
	if hex.EncodeToString(b) != golden {
		t.Fatalf("encoded %x, want %s", b, golden)
	}
	got, err := decodeRun(nil, b)
	if err != nil || !slices.Equal(got, items) {
		t.Fatalf("decode: %+v, %v; want %+v", got, err, items)
	}
	for _, bad := range [][]byte{nil, {0}, {1}, b[:len(b)-1], append(slices.Clone(b), 0),
		encodeRun(nil, []runItem{{id: 5, body: 5}}),                   // a body not older than its copy
		encodeRun(nil, []runItem{{id: 5, body: 1}, {id: 5, body: 1}}), // ids that do not grow
	} {
		if _, err := decodeRun(nil, bad); err == nil {
			t.Errorf("decode %x: no error", bad)
		}
	}
}

// FuzzDecodeRun feeds the decoder of the items column what a damaged or
// hostile file could hold: it must refuse it, or decode items that encode
// and decode to themselves (a varint may come in more bytes than needed).
func FuzzDecodeRun(f *testing.F) {
	f.Add(encodeRun(nil, []runItem{{id: 2, body: 1, size: 3}}))
	f.Add(encodeRun(nil, []runItem{{id: 10, body: 9, size: 128}, {id: 11, body: 9, exp: 5, deliv: 1, notBf: 7}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeRun(nil, b)
		if err != nil {
			return
		}
		enc := encodeRun(nil, items)
		again, err := decodeRun(nil, enc)
		if err != nil || !slices.Equal(again, items) {
			t.Fatalf("%x decodes to %+v, which encodes to %x, which decodes to %+v, %v", b, items, enc, again, err)
		}
		if len(enc) > len(b) {
			t.Fatalf("%x decodes to %+v, which encodes longer: %x", b, items, enc)
		}
	})
}

// copyRows counts the rows of copies and the copies they hold.
func copyRows(t testing.TB, s *Store) (rows, copies int) {
	t.Helper()
	if err := s.rdb.QueryRow(`SELECT count(*), coalesce(sum(n), 0) FROM copies`).Scan(&rows, &copies); err != nil {
		t.Fatal(err)
	}
	return rows, copies
}

// submitShared submits one request that puts each message in every queue
// of qs, sharing its bytes, and returns its Op.
func submitShared(t testing.TB, ms []*message.Message, qs ...*Queue) *Op {
	t.Helper()
	var puts []Put
	for _, m := range ms {
		data, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			puts = append(puts, Put{Queue: q, Msg: m, Data: data})
		}
	}
	op, err := qs[0].s.Submit(puts)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// A commit's copies of one queue and priority are one row, up to
// maxRunLen copies: 200 publishes to two queues in one request are 8
// rows, not 400.
func TestRunsOneRowPerCommitAndQueue(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	publishShared(t, 200, a, b)
	if rows, copies := copyRows(t, s); rows != 2*4 || copies != 400 {
		t.Fatalf("%d rows holding %d copies, want 8 rows (200/%d per queue) holding 400", rows, copies, maxRunLen)
	}
	want := bodies("m", 200)
	// a acks out of order: every other one first, then the rest.
	var ds []*Delivery
	for range 200 {
		_, d := pollBody(t, a)
		ds = append(ds, d)
	}
	for i := 0; i < 200; i += 2 {
		if err := ds[i].Ack(); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	if _, copies := copyRows(t, s); copies != 300 {
		t.Fatalf("%d copies after a acked half, want 300", copies)
	}
	for i := 1; i < 200; i += 2 {
		if err := ds[i].Ack(); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	if got := drain(t, b); !slices.Equal(got, want) {
		t.Fatalf("b: %d messages, want the 200 in order", len(got))
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A run never spans another row of its queue and priority: a message
// dead-lettered between two copies in one commit, a plain row, is
// delivered between them after a restart, from disk.
func TestRunsSplitAroundPlainRows(t *testing.T) {
	// gate, when set, holds the writer after its next commit, so that
	// what is submitted meanwhile makes one batch.
	var gate atomic.Pointer[chan struct{}]
	held := make(chan struct{}, 1)
	s, path := openTemp(t, func(c *Config) {
		c.PrefetchMessages = 2
		c.OnCommit = func(int, time.Duration) {
			if g := gate.Swap(nil); g != nil {
				held <- struct{}{}
				<-*g
			}
		}
	})
	src := mustQueue(t, s, "src", KindReceive)
	a := mustQueue(t, s, "src"+DeadLetterSuffix, KindReceive)
	b, c := mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive)
	enc := func(m *message.Message) []byte {
		d, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	mustPut(t, src, msg(4, "y"))
	_, dy := pollBody(t, src)
	if dy == nil {
		t.Fatal("y not delivered")
	}
	x, z := msg(4, "x"), msg(4, "z")
	dx, dz := enc(x), enc(z)
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	// A failure before the release must not leave the writer held, or
	// closing the store would wait for it for ever.
	t.Cleanup(open)
	gate.Store(&release)
	trigger, err := s.Submit([]Put{{Queue: c, Msg: msg(4, "w")}})
	if err != nil {
		t.Fatal(err)
	}
	<-held
	opX, err := s.Submit([]Put{{Queue: a, Msg: x, Data: dx}, {Queue: b, Msg: x, Data: dx}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dy.DeadLetter("between x and z"); err != nil {
		t.Fatal(err)
	}
	opZ, err := s.Submit([]Put{{Queue: a, Msg: z, Data: dz}, {Queue: b, Msg: z, Data: dz}})
	if err != nil {
		t.Fatal(err)
	}
	open()
	for _, op := range []*Op{trigger, opX, opZ} {
		if err := op.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	if rows, _ := copyRows(t, s); rows != 4 {
		t.Fatalf("%d rows of copies, want 4: a's two runs around y, b's one and c's", rows)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, func(c *Config) { c.PrefetchMessages = 2 })
	a, _ = s.Lookup("src" + DeadLetterSuffix)
	b, _ = s.Lookup("b")
	if got := drain(t, a); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("a after a restart: %v, want x y z", got)
	}
	if got := drain(t, b); !slices.Equal(got, []string{"x", "z"}) {
		t.Fatalf("b: %v", got)
	}
	closeAndCheck(t, s, path)
}

// A nack's delivery count and a browse, a move and an expiry each find a
// copy inside its run, and the run keeps the others.
func TestRunsKeepStateOfEachCopy(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b, other := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "other", KindReceive)
	var ms []*message.Message
	for _, body := range bodies("m", 5) {
		ms = append(ms, msg(4, body))
	}
	if err := submitShared(t, ms, a, b).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, d := pollBody(t, a)
	if err := d.Nack("try again"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, nil)
	a, _ = s.Lookup("a")
	b, _ = s.Lookup("b")
	other, _ = s.Lookup("other")
	got, err := a.Browse(context.Background(), 0)
	if err != nil || len(got) != 5 {
		t.Fatalf("browse a: %d messages, %v; want 5", len(got), err)
	}
	if got[0].Attempt != 2 || got[1].Attempt != 1 {
		t.Fatalf("browse a: attempts %d and %d, want the nacked copy's 2 kept across the restart, then 1", got[0].Attempt, got[1].Attempt)
	}
	if n, err := a.Move(context.Background(), []Move{{RowID: got[2].RowID, To: other}}); err != nil || n != 1 {
		t.Fatalf("move: %d, %v", n, err)
	}
	if got := drain(t, other); !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("other: %v", got)
	}
	if n, err := a.Purge(context.Background()); err != nil || n != 4 {
		t.Fatalf("purge a: %d, %v; want 4", n, err)
	}
	if got := drain(t, b); !slices.Equal(got, bodies("m", 5)) {
		t.Fatalf("b: %v, want its 5 untouched", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A store of schema 2, whose rows of copies hold one copy each, opens
// with each row turned into a run of one, delivered and acked as before.
func TestMigrationFromSchema2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "petrel.db")
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := msg(4, "old").MarshalBinary()
	n := len(data)
	for _, stmt := range []string{migrations[0], migrations[1], `PRAGMA user_version = 2`,
		fmt.Sprintf(`INSERT INTO queues (id, name, kind, depth, bytes, enqueued) VALUES (1, 'a', 1, 1, %d, 1), (2, 'b', 1, 1, %d, 1)`, n, n),
		`INSERT INTO copies (queue, priority, id, expires_at, deliveries, body) VALUES (1, 4, 6, 0, 2, 5), (2, 4, 7, 0, 0, 5)`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO bodies (id, data) VALUES (5, ?)`, data); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openAt(t, path, nil)
	a, _ := s.Lookup("a")
	b, _ := s.Lookup("b")
	got, err := a.Browse(context.Background(), 0)
	if err != nil || len(got) != 1 || got[0].Attempt != 3 {
		t.Fatalf("browse a: %+v, %v; want the old copy, attempt 3", got, err)
	}
	putShared(t, msg(4, "new"), a, b)
	for _, q := range []*Queue{a, b} {
		if got := drain(t, q); !slices.Equal(got, []string{"old", "new"}) {
			t.Fatalf("%s: %v, want the old copy, then the new", q.Name(), got)
		}
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// pollAll polls n deliveries of q.
// publishShared stores n messages m0..m<n-1> at priority 4, each shared by
// qs, in one commit.
func publishShared(t testing.TB, n int, qs ...*Queue) {
	t.Helper()
	var ms []*message.Message
	for _, body := range bodies("m", n) {
		ms = append(ms, msg(4, body))
	}
	if err := submitShared(t, ms, qs...).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// takeAll takes the leases of ds from q, under q's lock, and returns their
// acks, as Queue.ack would gather them.
func takeAll(t testing.TB, q *Queue, ds []*Delivery) []ackRow {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	rows := make([]ackRow, 0, len(ds))
	for _, d := range ds {
		l, err := q.take(d)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ackOf(q, l))
	}
	return rows
}

func pollAll(t testing.TB, q *Queue, n int) []*Delivery {
	t.Helper()
	ds := make([]*Delivery, 0, n)
	for range n {
		d, err := q.Poll()
		if err != nil {
			t.Fatalf("poll %s: %v", q.Name(), err)
		}
		ds = append(ds, d)
	}
	return ds
}

// Runs acked whole are deleted without being read, those that were
// delivered from memory and those refilled from disk; a run acked in
// part is still read and rewritten.
func TestRunsAckedWholeDeletedUnread(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 64 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	publishShared(t, 200, a, b)
	// Runs of 64, 64, 64 and 8 in each queue; 64 of a's copies are in
	// memory, the rest refilled as a is polled.
	if err := a.AckAll(pollAll(t, a, 200)); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := s.w.wholeRuns.Load(); got != 4 {
		t.Fatalf("%d runs deleted unread, want a's 4", got)
	}
	if rows, copies := copyRows(t, s); rows != 4 || copies != 200 {
		t.Fatalf("%d rows holding %d copies, want b's 4 holding 200", rows, copies)
	}
	if st := a.Stats(); st.Depth != 0 || st.Bytes != 0 || st.Acked != 200 {
		t.Fatalf("a: %+v", st)
	}
	// b acks the first 100: one run whole, the second in part.
	ds := pollAll(t, b, 200)
	if err := b.AckAll(ds[:100]); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := s.w.wholeRuns.Load(); got != 5 {
		t.Fatalf("%d runs deleted unread, want 5", got)
	}
	if rows, copies := copyRows(t, s); rows != 3 || copies != 100 {
		t.Fatalf("%d rows holding %d copies, want 3 holding 100", rows, copies)
	}
	// The rest of the second run is not that run whole: it is read.
	if err := b.AckAll(ds[100:]); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 0, 0, 0)
	if got := s.w.wholeRuns.Load(); got != 7 {
		t.Fatalf("%d runs deleted unread, want 7", got)
	}
	if st := b.Stats(); st.Depth != 0 || st.Bytes != 0 || st.Acked != 200 {
		t.Fatalf("b: %+v", st)
	}
	closeAndCheck(t, s, path)
}

// Acks that take a run for whole when it changed since are found out by
// the run's items: the run is read and each copy acked as before.
func TestRunsWholeAckOfAChangedRun(t *testing.T) {
	s, path := openTemp(t, nil)
	a, other := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "other", KindReceive)
	publishShared(t, 10, a, other)
	ds := pollAll(t, a, 10)
	// The acks say copy 3 expires, which its run does not: as a stale
	// entry would, since the run changed after the entry was made.
	rows := takeAll(t, a, ds)
	if rows[0].run == 0 || rows[0].runLen != 10 {
		t.Fatalf("ack of the first copy names run %d of %d, want the run of 10", rows[0].run, rows[0].runLen)
	}
	rows[3].exp = 1
	if err := s.w.submit(&request{kind: reqAck, q: a, acks: rows}); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := s.w.wholeRuns.Load(); got != 0 {
		t.Fatalf("%d runs deleted unread, want none", got)
	}
	if rows, copies := copyRows(t, s); rows != 1 || copies != 10 {
		t.Fatalf("%d rows holding %d copies, want other's 1 holding 10", rows, copies)
	}
	if st := a.Stats(); st.Depth != 0 || st.Acked != 10 {
		t.Fatalf("a: %+v", st)
	}
	if got := drain(t, other); !slices.Equal(got, bodies("m", 10)) {
		t.Fatalf("other: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// The writer gives a queue back the array of acks it took, once
// committed, and the queue gathers its next acks in it.
func TestGatheredAcksArrayReused(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	publishShared(t, 200, a, b)
	ds := pollAll(t, a, 200)
	// Gathered as Queue.ack does, so that the writer takes them all at
	// once.
	rows := takeAll(t, a, ds[:100])
	a.mu.Lock()
	a.acks = append(a.acks, rows...)
	a.ackQueued = true
	a.mu.Unlock()
	if err := s.w.submit(&request{kind: reqAck, q: a, gathered: true}); err != nil {
		t.Fatal(err)
	}
	// The writer gives the array back after it completed its batch's
	// operations, settle's among them when both shared the batch: a
	// second settle, a batch of its own after that one, waits for it.
	settle(t, s)
	settle(t, s)
	a.mu.Lock()
	spare := cap(a.spareAcks)
	a.mu.Unlock()
	if spare < 100 {
		t.Fatalf("queue holds a spare array of %d acks after a commit of 100, want it given back", spare)
	}
	for _, d := range ds[100:] {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if got := drain(t, b); len(got) != 200 {
		t.Fatalf("b: %d messages, want 200", len(got))
	}
	wantTables(t, s, 0, 0, 0)
	if st := a.Stats(); st.Depth != 0 || st.Acked != 200 {
		t.Fatalf("a: %+v", st)
	}
	closeAndCheck(t, s, path)
}

// A consumer that acks a run a few copies per commit, as an MQTT
// subscriber's PUBACKs do, has the run read once: the writer keeps the
// run it rewrote. Nacks, moves and a restart between the acks leave the
// table as the acks, nacks and moves say.
func TestRunsKeptAcrossPartialAcks(t *testing.T) {
	s, path := openTemp(t, nil)
	a, other, dlq := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "other", KindReceive), mustQueue(t, s, "dlq", KindReceive)
	publishShared(t, 60, a, other)
	ds := pollAll(t, a, 50)
	ackEach := func(ds []*Delivery) {
		t.Helper()
		for _, d := range ds {
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
			settle(t, s) // one commit each
		}
	}
	ackEach(ds[:10])
	if got := s.w.runReads.Load(); got != 1 {
		t.Fatalf("10 acks of one run, one commit each, read it %d times; want once", got)
	}
	// A nack rewrites the run through the kept copy; so does a move of
	// the run's last copy, m59, which moves the run to a new key.
	if err := ds[10].Nack("again"); err != nil {
		t.Fatal(err)
	}
	all, err := a.Browse(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].RowID
	if n, err := a.Move(context.Background(), []Move{{RowID: last, To: dlq}}); err != nil || n != 1 {
		t.Fatalf("move: %d, %v", n, err)
	}
	// (The move looks for the copy at each priority above the run's.)
	reads := s.w.runReads.Load()
	ackEach(ds[11:30])
	if got := s.w.runReads.Load() - reads; got != 0 {
		t.Fatalf("the run was read %d more times after the nack and the move; want none", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, nil)
	a, _ = s.Lookup("a")
	dlq, _ = s.Lookup("dlq")
	other, _ = s.Lookup("other")
	got, err := a.Browse(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range got {
		m, err := message.Decode(d.Data, message.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, string(m.Body))
	}
	want := append([]string{"m10"}, bodies("m", 59)[30:]...) // m59 moved
	if !slices.Equal(left, want) || got[0].Attempt != 2 {
		t.Fatalf("a holds %v (first attempt %d) after the restart; want %v, the nacked copy's attempt 2", left, got[0].Attempt, want)
	}
	// m10 waits out its backoff.
	if got := drain(t, a); !slices.Equal(got, want[1:]) {
		t.Fatalf("a: %v", got)
	}
	if got := drain(t, dlq); !slices.Equal(got, []string{"m59"}) {
		t.Fatalf("dlq: %v", got)
	}
	if got := drain(t, other); !slices.Equal(got, bodies("m", 60)) {
		t.Fatalf("other: %v", got)
	}
	wantTables(t, s, 0, 1, 1)
	closeAndCheck(t, s, path)
}

// A run of single puts acked whole frees its bodies with one ranged
// delete: nothing but its bodies and its copies' ids lie in the range.
// Runs of a shared body's copies, and puts to two queues interleaved in
// one commit, do not make such a range and free their bodies by id. Every
// body goes either way, none of another's.
func TestRunsOfSinglePutsFreeARange(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b, c := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive)
	submitWait(t, s, singlePuts(20, a))
	// b and c alternate: each queue's run has the other's ids between.
	submitWait(t, s, singlePuts(20, b, c))
	publishShared(t, 10, b, c)
	// What lies beside a's range in the table stays.
	if err := a.AckAll(pollAll(t, a, 20)); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := s.w.rangeFrees.Load(); got != 1 {
		t.Fatalf("%d ranged frees after a's run was acked, want 1", got)
	}
	wantTables(t, s, 0, 40, 30)
	if err := b.AckAll(pollAll(t, b, 20)); err != nil {
		t.Fatal(err)
	}
	if err := c.AckAll(pollAll(t, c, 20)); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := s.w.rangeFrees.Load(); got != 1 {
		t.Fatalf("%d ranged frees, want still 1: b's and c's runs hold no range", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A refill of runs of single copies reads their bodies in one range scan
// and walks past the bodies of another queue's copies that lie between
// them; each body read is its own, though they share one array: growing
// one leaves the next intact.
func TestRefillOfSingleRunsSkipsOtherBodies(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 4 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	submitWait(t, s, singlePuts(100, a, b))
	ds := pollAll(t, a, 50)
	var got []string
	for _, d := range ds {
		m, err := message.Decode(d.Data, message.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Body))
	}
	for i := range ds[:len(ds)-1] {
		before := slices.Clone(ds[i+1].Data)
		grown := append(ds[i].Data, "grown"...)
		if !slices.Equal(ds[i+1].Data, before) || len(grown) != len(ds[i].Data)+5 {
			t.Fatalf("growing delivery %d's data changed the next one's", i)
		}
	}
	var want []string
	for i, body := range bodies("m", 100) {
		if i%2 == 0 {
			want = append(want, body)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("a: %v, want %v", got, want)
	}
	if err := a.AckAll(ds); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != 50 || got[0] != "m1" || got[49] != "m99" {
		t.Fatalf("b: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A run of single copies whose items claim bodies of absurd sizes, as a
// damaged file might, is refilled from the bodies' real bytes: the sizes
// only hint at what to allocate, within a bound.
func TestRefillOfSingleRunsBoundsClaimedSizes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	s := openAt(t, path, nil)
	a := mustQueue(t, s, "a", KindReceive)
	submitWait(t, s, singlePuts(3, a))
	db := closeCheckedAndOpen(t, s, path)
	var key int64
	var blob []byte
	if err := db.QueryRowContext(ctx, `SELECT id, items FROM copies`).Scan(&key, &blob); err != nil {
		t.Fatal(err)
	}
	items, err := decodeRun(nil, blob)
	if err != nil || len(items) != 3 {
		t.Fatalf("run: %v, %v", items, err)
	}
	for i := range items {
		items[i].size = 1 << 60
	}
	if _, err := db.ExecContext(ctx, `UPDATE copies SET items = ? WHERE id = ?`, encodeRun(nil, items), key); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openAt(t, path, nil)
	a, _ = s.Lookup("a")
	if got := drain(t, a); !slices.Equal(got, bodies("m", 3)) {
		t.Fatalf("a: %v", got)
	}
}

// singlePuts makes the puts of n messages m0..m<n-1> at priority 4, each
// with bytes of its own (a single put), the i-th to qs[i mod len(qs)].
func singlePuts(n int, qs ...*Queue) []Put {
	puts := make([]Put, 0, n)
	for i, body := range bodies("m", n) {
		m := msg(4, body)
		data, _ := m.MarshalBinary()
		puts = append(puts, Put{Queue: qs[i%len(qs)], Msg: m, Data: data})
	}
	return puts
}
