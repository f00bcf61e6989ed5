package queue

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// putShared stores m in every queue of qs with one Submit whose puts share
// one Data slice, as a topic's publish does.
func putShared(t testing.TB, m *message.Message, qs ...*Queue) {
	t.Helper()
	data, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	puts := make([]Put, len(qs))
	for i, q := range qs {
		puts[i] = Put{Queue: q, Msg: m, Data: data}
	}
	op, err := qs[0].s.Submit(puts)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatalf("shared put: %v", err)
	}
}

// tableCounts reads how many rows the store's tables hold, through the
// store's read connections.
func tableCounts(t testing.TB, s *Store) (messages, copies, bodies int) {
	t.Helper()
	err := s.rdb.QueryRowContext(context.Background(),
		`SELECT (SELECT count(*) FROM messages), (SELECT coalesce(sum(n), 0) FROM copies), (SELECT count(*) FROM bodies)`).Scan(&messages, &copies, &bodies)
	if err != nil {
		t.Fatal(err)
	}
	return messages, copies, bodies
}

func wantTables(t testing.TB, s *Store, messages, copies, bodies int) {
	t.Helper()
	settle(t, s)
	m, c, b := tableCounts(t, s)
	if m != messages || c != copies || b != bodies {
		t.Fatalf("tables hold %d messages, %d copies, %d bodies; want %d, %d, %d", m, c, b, messages, copies, bodies)
	}
}

func closeAndCheck(t testing.TB, s *Store, path string) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), path); err != nil {
		t.Fatal(err)
	}
}

// One publish to three queues is one body and three copies; an ack in one
// queue leaves the others whole; the last ack frees the body.
func TestSharedBodyStoredOnceFreedWithLastCopy(t *testing.T) {
	s, path := openTemp(t, nil)
	qs := []*Queue{mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive)}
	putShared(t, msg(4, "low"), qs...)
	putShared(t, msg(7, "high"), qs...)
	wantTables(t, s, 0, 6, 2)
	if got := drain(t, qs[0]); !slices.Equal(got, []string{"high", "low"}) {
		t.Fatalf("a: %v, want priority order", got)
	}
	wantTables(t, s, 0, 4, 2)
	for _, q := range qs[1:] {
		st := q.Stats()
		if st.Depth != 2 || st.Bytes == 0 {
			t.Fatalf("%s after a's acks: %+v, want its 2 copies", q.Name(), st)
		}
	}
	if got := drain(t, qs[1]); !slices.Equal(got, []string{"high", "low"}) {
		t.Fatalf("b: %v", got)
	}
	b, d := pollBody(t, qs[2])
	if b != "high" {
		t.Fatalf("c: %q", b)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 0, 1, 1)
	if got := drain(t, qs[2]); !slices.Equal(got, []string{"low"}) {
		t.Fatalf("c: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	if m, _ := s.Totals(); m != 0 {
		t.Fatalf("totals: %d messages, want 0", m)
	}
	closeAndCheck(t, s, path)
}

// A copy nacked past max_deliveries goes to the dead-letter queue as a
// message of its own; copies that expire go to the expiry address or
// away; the other copies stay, and the body goes with the last.
func TestSharedCopyDeadLetterAndExpiry(t *testing.T) {
	clk := newClock()
	s, path := openTemp(t, func(c *Config) { c.Now = clk.Now })
	a, b, c, k := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive), mustQueue(t, s, "k", KindReceive)
	a.SetPolicy(Policy{MaxDeliveries: 1})
	b.SetPolicy(Policy{ExpiryAddress: "expired"})
	m := msg(4, "m")
	m.TTL = time.Minute
	putShared(t, m, a, b, c, k)
	wantTables(t, s, 0, 4, 1)

	_, d := pollBody(t, a)
	if err := d.Nack("bad"); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 1, 3, 1)
	dlq, ok := s.Lookup("a.dlq")
	if !ok {
		t.Fatal("no dead-letter queue")
	}
	if got, d := pollBody(t, dlq); got != "m" || !strings.Contains(d.Reason, "bad") {
		t.Fatalf("dead letter %q, reason %q", got, d.Reason)
	}

	clk.Advance(2 * time.Minute)
	if err := s.Sweep(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	exp, ok := s.Lookup("expired")
	if !ok || exp.Stats().Depth != 1 {
		t.Fatalf("expiry address: %v, want the copy of b", ok)
	}
	if st := c.Stats(); st.Depth != 0 || st.Expired != 1 {
		t.Fatalf("c: %+v, want its copy expired", st)
	}
	if st := a.Stats(); st.DeadLettered != 1 || st.Depth != 0 {
		t.Fatalf("a: %+v", st)
	}
	// k's copy expired too, the last one: the body went with it. The dead
	// letter and b's expired copy are rows of messages now.
	if st := k.Stats(); st.Depth != 0 || st.Expired != 1 {
		t.Fatalf("k: %+v, want its copy expired", st)
	}
	wantTables(t, s, 2, 0, 0)
	closeAndCheck(t, s, path)
}

// Copies survive a restart with their priority order, delivery counts and
// body; the references are counted again at open.
func TestSharedCopiesAcrossRestart(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	a.SetPolicy(Policy{RedeliveryDelay: time.Millisecond})
	want := bodies("m", 40)
	for i, body := range want {
		putShared(t, msg(uint8(i%3), body), a, b)
	}
	_, d := pollBody(t, a)
	if err := d.Nack("again"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	closeAndCheck(t, s, path)

	s = openAt(t, path, func(c *Config) { c.PrefetchMessages = 16 })
	a, b = mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	wantTables(t, s, 0, 80, 40)
	var order []string
	for i := 2; i >= 0; i-- {
		for j, body := range want {
			if j%3 == i {
				order = append(order, body)
			}
		}
	}
	d, err := a.Receive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.Attempt != 2 {
		t.Fatalf("first delivery after restart: attempt %d, want 2", d.Attempt)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); !slices.Equal(got, order) {
		t.Fatalf("b after restart: %v\nwant %v", got, order)
	}
	wantTables(t, s, 0, 39, 39)
	if got := drain(t, a); len(got) != 39 {
		t.Fatalf("a after restart: %d messages, want 39", len(got))
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// Browse, purge, move and drop see copies as rows of their queue; a moved
// copy keeps its body.
func TestSharedCopiesAdmin(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b, c, to := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive), mustQueue(t, s, "to", KindReceive)
	putShared(t, msg(4, "x"), a, b, c)
	mustPut(t, a, msg(4, "own"))
	rows, err := a.Browse(context.Background(), 0)
	if err != nil || len(rows) != 2 || string(rows[0].Data) == "" {
		t.Fatalf("browse a: %d rows, %v", len(rows), err)
	}
	if n, err := a.Purge(context.Background()); err != nil || n != 2 {
		t.Fatalf("purge a: %d, %v", n, err)
	}
	wantTables(t, s, 0, 2, 1)
	rows, err = b.Browse(context.Background(), 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("browse b: %v, %v", rows, err)
	}
	if n, err := b.Move(context.Background(), []Move{{RowID: rows[0].RowID, To: to}}); err != nil || n != 1 {
		t.Fatalf("move: %d, %v", n, err)
	}
	if n, err := s.Drop(context.Background(), c); err != nil || n != 1 {
		t.Fatalf("drop c: %d, %v", n, err)
	}
	wantTables(t, s, 0, 1, 1)
	if got := drain(t, to); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("moved copy: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A put request that fails stores no copy and no body: all or none.
func TestSharedPutAllOrNone(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	if _, err := s.Drop(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	m := msg(4, "x")
	data, _ := m.MarshalBinary()
	op, err := s.Submit([]Put{{Queue: a, Msg: m, Data: data}, {Queue: b, Msg: m, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("put into a dropped queue: %v", err)
	}
	wantTables(t, s, 0, 0, 0)
	// Optional puts into the dropped queue are skipped; the one left is a
	// copy of a body of its own, as every put is.
	op, err = s.Submit([]Put{{Queue: a, Msg: m, Data: data}, {Queue: b, Msg: m, Data: data, Optional: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 0, 1, 1)
	closeAndCheck(t, s, path)
}

// A store made by schema 1 opens under schema 2: its messages are still
// delivered, and shared puts work beside them.
func TestMigrationFromSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "petrel.db")
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	m := msg(4, "old")
	data, _ := m.MarshalBinary()
	for _, stmt := range []string{migrations[0], `PRAGMA user_version = 1`,
		`INSERT INTO queues (id, name, kind, depth, bytes, enqueued) VALUES (1, 'a', 1, 1, ` + fmt.Sprint(len(data)) + `, 1)`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO messages (id, queue, priority, expires_at, data) VALUES (7, 1, 4, 0, ?)`, data); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openAt(t, path, nil)
	var version int
	if err := s.rdb.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", version, err, len(migrations))
	}
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	putShared(t, msg(4, "new"), a, b)
	if got := drain(t, a); !slices.Equal(got, []string{"old", "new"}) {
		t.Fatalf("a: %v, want the old message, then the new", got)
	}
	if got := drain(t, b); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("b: %v", got)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

const envSharedCrashDir = "PETREL_SHARED_CRASH_DIR"

// TestSharedCrashChild is the child of TestSharedCrashAllOrNone: it
// publishes to three queues from several goroutines, printing "ok N" once
// a publish committed, until it is killed.
func TestSharedCrashChild(t *testing.T) {
	dir := os.Getenv(envSharedCrashDir)
	if dir == "" {
		t.Skip("child process of TestSharedCrashAllOrNone")
	}
	s, err := Open(context.Background(), Config{Path: filepath.Join(dir, "petrel.db"), Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	qs := []*Queue{mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				body := fmt.Sprintf("%s-%d-%d", filepath.Base(dir), g, i)
				putShared(t, msg(uint8(i%10), body), qs...)
				mu.Lock()
				os.Stdout.WriteString("ok " + body + "\n")
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestSharedCrashAllOrNone kills a publishing process with SIGKILL and
// checks that each publish is in every queue or in none, that every
// publish that returned is there, and that the store is consistent:
// each body has its copies and each copy its body.
func TestSharedCrashAllOrNone(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envSharedCrashDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
			acked[k] = true
			if len(acked) == 300 {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, stderr.String())
	}
	path := filepath.Join(dir, "petrel.db")
	if err := Check(context.Background(), path); err != nil {
		t.Fatalf("after the crash: %v", err)
	}
	s := openAt(t, path, nil)
	var sets []map[string]bool
	for _, name := range []string{"a", "b", "c"} {
		got := map[string]bool{}
		for _, b := range drain(t, mustQueue(t, s, name, KindReceive)) {
			if got[b] {
				t.Fatalf("%s holds %q twice", name, b)
			}
			got[b] = true
		}
		sets = append(sets, got)
	}
	for k := range acked {
		if !sets[0][k] {
			t.Fatalf("publish %q returned but is not stored", k)
		}
	}
	for i := 1; i < len(sets); i++ {
		for k := range sets[0] {
			if !sets[i][k] {
				t.Fatalf("%q is in a but not in queue %d", k, i)
			}
		}
		if len(sets[i]) != len(sets[0]) {
			t.Fatalf("queue %d holds %d publishes, a %d", i, len(sets[i]), len(sets[0]))
		}
	}
	t.Logf("returned %d, stored %d in each queue", len(acked), len(sets[0]))
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// A copy whose body left the cache is refilled from the bodies table.
func TestSharedRefillPastTheCache(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16; c.PrefetchBytes = 1 << 10 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	want := bodies(strings.Repeat("x", 100), 200)
	for _, body := range want {
		putShared(t, msg(4, body), a, b)
	}
	settle(t, s)
	s.bodies.mu.Lock()
	cached := len(s.bodies.m)
	s.bodies.mu.Unlock()
	if cached == 0 || cached >= len(want) {
		t.Fatalf("cache holds %d of %d bodies; want its budget to keep some, not all", cached, len(want))
	}
	for _, q := range []*Queue{a, b} {
		if got := drain(t, q); !slices.Equal(got, want) {
			t.Fatalf("%s: %d messages, want %d in order", q.Name(), len(got), len(want))
		}
	}
	wantTables(t, s, 0, 0, 0)
	s.bodies.mu.Lock()
	cached = len(s.bodies.m)
	s.bodies.mu.Unlock()
	if cached != 0 {
		t.Fatalf("cache holds %d bodies once all were freed", cached)
	}
	closeAndCheck(t, s, path)
}

// The writer counts copies only for bodies that have more than one: a
// backlog of single puts costs it no memory per message, before a restart
// and after, and their runs are marked so that the count at open skips
// them. Acking every copy, in any order, still frees every body.
func TestSingleCopiesAreNotCounted(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 4 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	for _, body := range bodies("single", 100) {
		mustPut(t, a, msg(4, body))
	}
	m := msg(4, "shared")
	data, _ := m.MarshalBinary()
	op, err := s.Submit([]Put{{Queue: a, Msg: m, Data: data}, {Queue: b, Msg: m, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 0, 102, 101)
	wantRefs := func(s *Store, when string) {
		t.Helper()
		settle(t, s) // the writer is idle, and its last change happened before
		if s.w.refs.len() != 1 {
			t.Fatalf("%s: the writer counts %d bodies, want 1 (the shared one)", when, s.w.refs.len())
		}
		for body, n := range s.w.refs.all() {
			if n != 2 {
				t.Fatalf("%s: body %d counted %d times, want 2", when, body, n)
			}
		}
	}
	wantRefs(s, "after the puts")
	var marked int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM copies WHERE body = ?`, singleRun).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked == 0 {
		t.Fatal("no run is marked as runs of single copies")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, func(c *Config) { c.PrefetchMessages = 4 })
	wantRefs(s, "after a restart")
	a, _ = s.Lookup("a")
	b, _ = s.Lookup("b")
	if got := drain(t, b); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("b: %v", got)
	}
	if got := drain(t, a); len(got) != 101 || got[100] != "shared" {
		t.Fatalf("a: %d messages, last %q; want 101, the shared one last", len(got), got[len(got)-1])
	}
	wantTables(t, s, 0, 0, 0)
	if s.w.refs.len() != 0 {
		t.Fatalf("after every ack the writer still counts %d bodies", s.w.refs.len())
	}
	closeAndCheck(t, s, path)
}
