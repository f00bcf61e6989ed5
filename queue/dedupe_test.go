package queue

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

func TestDedupeRunEncodingRoundTrip(t *testing.T) {
	for _, ids := range [][]int64{
		{7},
		{1, 2, 3, 1000, 1 << 40},
		// Ids past 2^63 are negative as SQLite orders them; a run can
		// span the whole range.
		{math.MinInt64, -5, 0, 3, math.MaxInt64},
	} {
		b := encodeDedupeRun(nil, ids)
		got, err := decodeDedupeRun(nil, ids[0], ids[len(ids)-1], int64(len(ids)), b)
		if err != nil || !slices.Equal(got, ids) {
			t.Fatalf("%v: decoded %v, %v", ids, got, err)
		}
	}
	// What the writer never writes does not decode.
	for _, tc := range []struct {
		name        string
		min, max, n int64
		b           []byte
	}{
		{"no ids", 5, 5, 0, nil},
		{"too many", 5, 5, maxDedupeRun + 1, make([]byte, maxDedupeRun)},
		{"zero delta", 5, 5, 2, []byte{0}},
		{"wrong end", 5, 9, 2, []byte{3}},
		{"bytes left", 5, 8, 2, []byte{3, 1}},
		{"short", 5, 8, 3, []byte{3}},
		{"wraps", math.MaxInt64 - 1, math.MinInt64, 2, encodeDedupeRun(nil, []int64{0, 2})},
	} {
		if _, err := decodeDedupeRun(nil, tc.min, tc.max, tc.n, tc.b); err == nil {
			t.Errorf("%s: decoded", tc.name)
		}
	}
}

// FuzzDecodeDedupeRun: a run read back from the file either decodes into
// n ids that grow from min to max, or is refused; it never panics.
func FuzzDecodeDedupeRun(f *testing.F) {
	f.Add(int64(1), int64(1000), int64(3), encodeDedupeRun(nil, []int64{1, 2, 1000}))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), int64(2), encodeDedupeRun(nil, []int64{math.MinInt64, math.MaxInt64}))
	f.Add(int64(5), int64(5), int64(1), []byte{})
	f.Fuzz(func(t *testing.T, minID, maxID, n int64, b []byte) {
		ids, err := decodeDedupeRun(nil, minID, maxID, n, b)
		if err != nil {
			return
		}
		if int64(len(ids)) != n || ids[0] != minID || ids[len(ids)-1] != maxID {
			t.Fatalf("decoded %d ids %v from min %d max %d n %d", len(ids), ids, minID, maxID, n)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ids do not grow: %v", ids)
			}
		}
		if again := encodeDedupeRun(nil, ids); !slices.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

// dedupeRuns returns q's dedupe runs as (n) counts, in key order.
func dedupeRuns(t testing.TB, s *Store, q *Queue) []int64 {
	t.Helper()
	settle(t, s)
	rows, err := s.rdb.Query(`SELECT n FROM dedupe_runs WHERE queue = ? ORDER BY origin, max_id`, q.id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// putDeduped submits ms to q with Dedupe in one commit and returns which
// were duplicates.
func putDeduped(t testing.TB, s *Store, q *Queue, ms []*message.Message) []bool {
	t.Helper()
	puts := make([]Put, len(ms))
	for i, m := range ms {
		puts[i] = Put{Queue: q, Msg: m, Dedupe: true}
	}
	op, err := s.Submit(puts)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	dups := make([]bool, len(ms))
	for i := range ms {
		dups[i] = op.Deduped(i)
	}
	return dups
}

// TestDedupeRunsOneRowPerCommitAndOrigin: a commit records the keys of one
// queue and origin in runs of at most maxDedupeRun ids, whatever their
// order or range; a resend of any of them, alone or among new ones, in
// order or not, is a duplicate, and so is a key twice in one commit.
func TestDedupeRunsOneRowPerCommitAndOrigin(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	other := message.NodeID{9}
	var ms []*message.Message
	for i := range 1000 {
		m := msg(4, fmt.Sprint("m", i))
		m.ID = uint64(1000 + 7*i)
		ms = append(ms, m)
	}
	// Ids past 2^63, and one of another origin with an id of the first's.
	big := msg(4, "big")
	big.ID = math.MaxUint64 - 1
	twin := msg(4, "twin")
	twin.ID, twin.Origin = ms[0].ID, other
	slices.Reverse(ms[500:]) // not in id order
	batch := append(slices.Clone(ms), big, twin, ms[3])
	dups := putDeduped(t, s, q, batch)
	if slices.Index(dups, true) != len(batch)-1 {
		t.Fatalf("duplicates %v, want only the last (a key twice in one commit)", dups)
	}
	if got := dedupeRuns(t, s, q); !slices.Equal(got, []int64{512, 489, 1}) {
		t.Fatalf("runs of %v ids, want 512, 489 (the 1000 and the big id) and 1 (the other origin)", got)
	}
	if st := q.Stats(); st.DedupeEntries != 1002 {
		t.Fatalf("%d dedupe entries, want 1002", st.DedupeEntries)
	}

	// Resends: each alone, then mixed with new ids around and between.
	for _, m := range []*message.Message{ms[0], ms[511], ms[512], ms[999], big, twin} {
		if d := putDeduped(t, s, q, []*message.Message{m}); !d[0] {
			t.Fatalf("resend of id %d of %x stored again", m.ID, m.Origin[:1])
		}
	}
	fresh := []*message.Message{msg(4, "low"), msg(4, "between"), msg(4, "high")}
	fresh[0].ID, fresh[1].ID, fresh[2].ID = 1, 1001, 1_000_000
	mixed := []*message.Message{fresh[2], ms[700], fresh[0], ms[10], fresh[1]}
	if got := putDeduped(t, s, q, mixed); !slices.Equal(got, []bool{false, true, false, true, false}) {
		t.Fatalf("mixed resend: duplicates %v", got)
	}
	for _, m := range fresh {
		if seen, err := q.Seen(context.Background(), m.Origin, m.ID); err != nil || !seen {
			t.Fatalf("Seen(%d) = %v, %v after its put", m.ID, seen, err)
		}
	}
	if seen, err := q.Seen(context.Background(), origin, 1002); err != nil || seen {
		t.Fatalf("Seen of an id never put = %v, %v", seen, err)
	}
	if got := len(drain(t, q)); got != 1000+2+3 {
		t.Fatalf("%d stored, want 1005", got)
	}
	closeAndCheck(t, s, path)
}

// TestMigrationFromSchema3: the keys of schema 1's dedupe table become runs
// of one, and still tell resends.
func TestMigrationFromSchema3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "petrel.db")
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	old := msg(4, "old")
	stmts := append(slices.Clone(migrations[:3]), `PRAGMA user_version = 3`,
		`INSERT INTO queues (id, name, kind) VALUES (1, 'q', 1)`)
	for _, stmt := range stmts {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{old.ID, math.MaxUint64} {
		if _, err := db.Exec(`INSERT INTO dedupe (queue, origin, msg_id, at) VALUES (1, ?, ?, 1)`, origin[:], int64(id)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := openAt(t, path, nil)
	q, _ := s.Lookup("q")
	if st := q.Stats(); st.DedupeEntries != 2 {
		t.Fatalf("%d dedupe entries after the migration, want 2", st.DedupeEntries)
	}
	huge := msg(4, "huge")
	huge.ID = math.MaxUint64
	if got := putDeduped(t, s, q, []*message.Message{old, huge, msg(4, "new")}); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("duplicates %v, want the two migrated keys", got)
	}
	if got := dedupeRuns(t, s, q); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Fatalf("runs %v, want the two migrated and the new", got)
	}
	closeAndCheck(t, s, path)
}

// TestDedupeManyQueuesInOneCommit: a commit with a few keys for each of
// many queues and origins, more than one statement reads or writes, tells
// each resend among new keys, in every queue.
func TestDedupeManyQueuesInOneCommit(t *testing.T) {
	s, path := openTemp(t, nil)
	const queues = 3*dedupeMaxSources + 5
	var puts []Put
	var qs []*Queue
	for i := range queues {
		q := mustQueue(t, s, fmt.Sprint("q", i), KindReceive)
		qs = append(qs, q)
		for j := range 3 {
			m := msg(4, fmt.Sprint(i, "/", j))
			m.ID = uint64(100 + j)
			m.Origin = message.NodeID{byte(j % 2), 7} // two origins per queue
			puts = append(puts, Put{Queue: q, Msg: m, Dedupe: true})
		}
	}
	op := submitWait(t, s, puts)
	for i := range puts {
		if op.Deduped(i) {
			t.Fatalf("put %d deduped on its first commit", i)
		}
	}
	// Again, each queue's second key beside a new one.
	var again []Put
	for i, q := range qs {
		again = append(again, puts[3*i+1])
		m := msg(4, "new")
		m.ID, m.Origin = 99, message.NodeID{1, 7}
		again = append(again, Put{Queue: q, Msg: m, Dedupe: true})
	}
	op = submitWait(t, s, again)
	for i := range again {
		if op.Deduped(i) != (i%2 == 0) {
			t.Fatalf("put %d of the resend: deduped %v", i, op.Deduped(i))
		}
	}
	for _, q := range qs {
		if st := q.Stats(); st.DedupeEntries != 4 || st.Depth != 4 {
			t.Fatalf("%s: %+v, want 4 keys and 4 messages", q.Name(), st)
		}
	}
	closeAndCheck(t, s, path)
}

// idsMsgs returns messages of origin with the given ids.
func idsMsgs(ids ...uint64) []*message.Message {
	var ms []*message.Message
	for _, id := range ids {
		m := msg(4, fmt.Sprint("id", id))
		m.ID = id
		ms = append(ms, m)
	}
	return ms
}

// TestDedupeRunsStayApart: ids that come late, below a run or inside its
// span, join that run or make one in the gap before it, so that the runs
// of an origin never span the same ids; each is then known, once and for
// all, and a run grown past maxDedupeRun is split.
func TestDedupeRunsStayApart(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	putDeduped(t, s, q, idsMsgs(10, 20, 30))
	dups := putDeduped(t, s, q, idsMsgs(5, 15, 20, 25, 35, 40))
	if !slices.Equal(dups, []bool{false, false, true, false, false, false}) {
		t.Fatalf("duplicates %v, want only 20", dups)
	}
	if got := dedupeRuns(t, s, q); !slices.Equal(got, []int64{1, 5, 2}) {
		t.Fatalf("runs of %v ids, want {5}, {10..30} and {35, 40}", got)
	}
	for _, id := range []uint64{5, 10, 15, 20, 25, 30, 35, 40} {
		if d := putDeduped(t, s, q, idsMsgs(id)); !d[0] {
			t.Fatalf("resend of %d stored again", id)
		}
		if seen, err := q.Seen(context.Background(), origin, id); err != nil || !seen {
			t.Fatalf("Seen(%d) = %v, %v", id, seen, err)
		}
	}
	for _, id := range []uint64{1, 6, 11, 31, 41} {
		if seen, err := q.Seen(context.Background(), origin, id); err != nil || seen {
			t.Fatalf("Seen(%d) of an id never put = %v, %v", id, seen, err)
		}
	}

	// A run of 512 even ids, then the odd ones between them: they all join
	// it, and it is written again as runs of 512 and 511.
	other := mustQueue(t, s, "other", KindReceive)
	var even, odd []uint64
	for i := range uint64(maxDedupeRun) {
		even = append(even, 1000+2*i)
		if i < maxDedupeRun-1 {
			odd = append(odd, 1001+2*i)
		}
	}
	putDeduped(t, s, other, idsMsgs(even...))
	if d := putDeduped(t, s, other, idsMsgs(odd...)); slices.Contains(d, true) {
		t.Fatal("an odd id inside the even run's span taken for a duplicate")
	}
	if got := dedupeRuns(t, s, other); !slices.Equal(got, []int64{512, 511}) {
		t.Fatalf("runs of %v ids, want 512 and 511", got)
	}
	if d := putDeduped(t, s, other, idsMsgs(append(even[:3:3], odd[len(odd)-3:]...)...)); slices.Contains(d, false) {
		t.Fatalf("resends after the split: duplicates %v, want all", d)
	}
	if st := other.Stats(); st.DedupeEntries != 2*maxDedupeRun-1 || st.Depth != 2*maxDedupeRun-1 {
		t.Fatalf("stats %+v, want %d keys and messages", st, 2*maxDedupeRun-1)
	}
	closeAndCheck(t, s, path)
}

// TestCheckFindsOverlappingDedupeRuns: two runs of an origin whose spans
// overlap are an inconsistency: a lookup reads only one of them.
func TestCheckFindsOverlappingDedupeRuns(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	putDeduped(t, s, q, idsMsgs(10, 30))
	drain(t, q)
	settle(t, s)
	s.Close()
	db, err := sql.Open("sqlite3", dsn(path, SyncFull, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO dedupe_runs (queue, origin, max_id, min_id, at, n, ids) VALUES (?, ?, 20, 20, 1, 1, X'')`, q.id, origin[:]); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), path); err == nil || !strings.Contains(err.Error(), "within the run before it") {
		t.Fatalf("Check = %v, want the overlapping runs", err)
	}
}

// TestDedupeRunsAgainstAModel: commits of ids in any order, new, resent,
// late or repeated within the commit, are told apart exactly as a set of
// every id accepted tells them, and the runs stay consistent.
func TestDedupeRunsAgainstAModel(t *testing.T) {
	s, path := openTemp(t, nil)
	q := mustQueue(t, s, "q", KindReceive)
	rng := rand.New(rand.NewPCG(7, 11))
	seen := map[uint64]bool{}
	for c := range 60 {
		var ids []uint64
		for range 1 + rng.IntN(80) {
			switch rng.IntN(10) {
			case 0:
				ids = append(ids, math.MaxUint64-uint64(rng.IntN(50))) // past 2^63
			default:
				ids = append(ids, uint64(rng.IntN(2000+100*c)))
			}
		}
		dups := putDeduped(t, s, q, idsMsgs(ids...))
		inCommit := map[uint64]bool{}
		for i, id := range ids {
			want := seen[id] || inCommit[id]
			if dups[i] != want {
				t.Fatalf("commit %d: id %d deduped %v, want %v", c, id, dups[i], want)
			}
			inCommit[id] = true
		}
		for id := range inCommit {
			seen[id] = true
		}
	}
	if st := q.Stats(); st.DedupeEntries != int64(len(seen)) {
		t.Fatalf("%d dedupe entries, want %d", st.DedupeEntries, len(seen))
	}
	for id := range seen {
		if ok, err := q.Seen(context.Background(), origin, id); err != nil || !ok {
			t.Fatalf("Seen(%d) = %v, %v", id, ok, err)
		}
	}
	closeAndCheck(t, s, path)
}
