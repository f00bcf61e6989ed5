package queue

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/petrelmq/petrel/message"
)

// dedupeKey is one (queue, origin, id) of the dedupe window.
type dedupeKey struct {
	q      int64
	origin message.NodeID
	id     uint64
}

// The dedupe window is kept in runs: ids that one queue accepted from one
// origin, at most maxDedupeRun of them, in one row of dedupe_runs keyed by
// (queue, origin, the largest id). A row per key made its insert the
// costliest part of storing what a remote client or a link sends, about
// as much as storing the message. Ids are ordered as SQLite orders them,
// as int64; ids holds the run past its smallest, which min_id holds:
//
//	ids := (n-1) times: delta uvarint  an id minus the one before it, as
//	                                   uint64 (modulo 2^64), > 0
//
// The runs of one queue and origin never overlap: each spans ids that no
// other one's span holds. So the only run that may hold an id is the first
// whose largest id is at or past it, one index probe, whatever ids a peer
// sends. A producer's ids grow: a commit's new ids are past the last run,
// which one probe tells, and go into a new run. An id that is not (a
// resend, or one that came late) is looked up in its run; if new, it joins
// that run when inside its span, or a new run in the gap before it.

// maxDedupeRun caps the ids of a run, so that a row stays near a page and
// a resend's lookup decodes little.
const maxDedupeRun = 512

// errBadDedupeRun is returned for a run of dedupe ids that does not
// decode.
var errBadDedupeRun = errors.New("malformed run of dedupe ids")

// encodeDedupeRun appends the encoding of ids, sorted and distinct, past
// the first, to dst.
func encodeDedupeRun(dst []byte, ids []int64) []byte {
	for i := 1; i < len(ids); i++ {
		dst = binary.AppendUvarint(dst, uint64(ids[i])-uint64(ids[i-1]))
	}
	return dst
}

// decodeDedupeRun appends to dst the ids of the run whose smallest id is
// minID, encoded in b, checking that it holds n ids, each greater than
// the one before, ending at maxID.
func decodeDedupeRun(dst []int64, minID, maxID, n int64, b []byte) ([]int64, error) {
	if n < 1 || n > maxDedupeRun || int64(len(b)) < n-1 {
		return dst, fmt.Errorf("%w: %d ids in %d bytes", errBadDedupeRun, n, len(b))
	}
	id := minID
	dst = append(dst, id)
	for i := int64(1); i < n; i++ {
		d, k := binary.Uvarint(b)
		if k <= 0 || d == 0 {
			return dst, fmt.Errorf("%w: id %d", errBadDedupeRun, i)
		}
		b = b[k:]
		next := int64(uint64(id) + d)
		if next <= id {
			return dst, fmt.Errorf("%w: id %d does not grow", errBadDedupeRun, i)
		}
		id = next
		dst = append(dst, id)
	}
	if len(b) != 0 || id != maxID {
		return dst, fmt.Errorf("%w: ends at %d, its row says %d, %d bytes left", errBadDedupeRun, id, maxID, len(b))
	}
	return dst, nil
}

// dedupeSource is a queue and an origin: the ids of one dedupe run.
type dedupeSource struct {
	q      int64
	origin message.NodeID
}

// admit decides, before anything of the batch is written, which puts fit
// the store's limits, and records the dedupe keys of those that do, many
// per statement: one statement per put was the most expensive part of
// storing what arrives over a link. It fills b.full and b.dups; applyPut
// then only reads them.
//
// The limit is checked first, against the batch's total as if nothing were
// a duplicate: a put refused for space must leave no dedupe record, or its
// resend would be dropped as a duplicate of a message never stored.
func (w *writer) admit(batch []*request, b *batch) error {
	var keys []dedupeKey
	var owners []dedupeOwner
	var msgs, bytes int64
	for _, r := range batch {
		if r.kind != reqPut {
			continue
		}
		n, size := int64(len(r.puts)), putBytes(r)
		if w.fullAfter(msgs, bytes, n, size) {
			b.markFull(r)
			continue
		}
		msgs, bytes = msgs+n, bytes+size
		for i, p := range r.puts {
			if p.Dedupe && !p.Queue.gone.Load() {
				keys = append(keys, dedupeKey{p.Queue.id, p.Msg.Origin, p.Msg.ID})
				owners = append(owners, dedupeOwner{r, i})
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	fresh, err := w.recordKeys(keys, b)
	if err != nil {
		return err
	}
	// The first put of a fresh key stores it; any other put of that key,
	// in this batch or before it, is a duplicate.
	for i, k := range keys {
		if fresh[k] {
			delete(fresh, k)
			continue
		}
		b.markDup(owners[i].r, owners[i].i)
	}
	return nil
}

type dedupeOwner struct {
	r *request
	i int
}

// recordKeys records keys in the dedupe window and returns those that
// were not there before. It reads each queue and origin's last run, up to
// dedupeMaxSources of them per statement; the ids past it are new, and
// become runs, up to dedupeMaxSources per insert. A commit that brings a
// few messages for each of a thousand queues makes as few statements as
// one that brings them all for one. The other ids take a probe each
// (recordOlder).
func (w *writer) recordKeys(keys []dedupeKey, b *batch) (map[dedupeKey]bool, error) {
	fresh := make(map[dedupeKey]bool, len(keys))
	index := map[dedupeSource]int{}
	var groups []dedupeGroup
	for _, k := range keys {
		src := dedupeSource{k.q, k.origin}
		i, ok := index[src]
		if !ok {
			i = len(groups)
			index[src] = i
			groups = append(groups, dedupeGroup{src: src})
		}
		groups[i].ids = append(groups[i].ids, int64(k.id))
	}
	for i := range groups {
		g := &groups[i]
		slices.Sort(g.ids)
		g.ids = slices.Compact(g.ids)
	}
	// The last ids the cache lacks are read, 32 queues and origins a
	// statement.
	var unknown []*dedupeGroup
	for i := range groups {
		g := &groups[i]
		if g.last, g.hasLast = w.dedupeLast[g.src]; !g.hasLast {
			unknown = append(unknown, g)
		}
	}
	for rest := unknown; len(rest) > 0; {
		chunk := rest[:min(len(rest), dedupeMaxSources)]
		rest = rest[len(chunk):]
		if err := w.lastDedupeIDs(chunk); err != nil {
			return nil, err
		}
	}
	ins := dedupeInserts{w: w, at: w.batchTime(), args: w.scratch[:0]}
	for i := range groups {
		g := &groups[i]
		past := 0
		if g.hasLast {
			past = firstAfter(g.ids, g.last)
		}
		if past > 0 {
			if err := w.recordOlder(g.src, g.ids[:past], fresh, &ins); err != nil {
				return nil, err
			}
		}
		for _, id := range g.ids[past:] {
			fresh[dedupeKey{g.src.q, g.src.origin, uint64(id)}] = true
		}
		if err := ins.add(g.src, g.ids[past:]); err != nil {
			return nil, err
		}
		if past < len(g.ids) {
			if b.dedupeLast == nil {
				b.dedupeLast = map[dedupeSource]int64{}
			}
			b.dedupeLast[g.src] = g.ids[len(g.ids)-1]
		}
	}
	if err := ins.flush(); err != nil {
		return nil, err
	}
	clear(ins.args[:cap(ins.args)])
	w.scratch = ins.args[:0]
	return fresh, nil
}

// firstAfter returns the index of the first of ids, sorted, past x.
func firstAfter(ids []int64, x int64) int {
	return sort.Search(len(ids), func(i int) bool { return ids[i] > x })
}

// dedupeGroup is the ids of one queue and origin in a commit, sorted and
// distinct, and the largest id its runs hold, if any.
type dedupeGroup struct {
	src     dedupeSource
	ids     []int64
	last    int64
	hasLast bool
}

// dedupeMaxSources is how many queues and origins one statement reads
// the last run of, and how many runs one insert writes.
const dedupeMaxSources = 32

// lastDedupeSQL[n] reads the largest id of n queues and origins, one
// column each (NULL for none); insertDedupeSQL[n] inserts n runs.
var lastDedupeSQL, insertDedupeSQL = func() ([]string, []string) {
	last := make([]string, dedupeMaxSources+1)
	insert := make([]string, dedupeMaxSources+1)
	for n := 1; n <= dedupeMaxSources; n++ {
		last[n] = `SELECT ` + strings.TrimSuffix(strings.Repeat(
			`(SELECT max_id FROM dedupe_runs WHERE queue = ? AND origin = ? ORDER BY max_id DESC LIMIT 1), `, n), `, `)
		insert[n] = `INSERT INTO dedupe_runs (queue, origin, max_id, min_id, at, n, ids) VALUES ` + valuesSQL(n, 7)
	}
	return last, insert
}()

// dedupeLastMax bounds the writer's cache of last dedupe ids: a node that
// hears from more queues and origins than that reads some of them again.
const dedupeLastMax = 1 << 16

// learnDedupeLast takes a committed batch's last dedupe ids into the
// writer's cache, or forgets the cache if the batch deleted runs.
func (w *writer) learnDedupeLast(b *batch) {
	if b.dedupeForget {
		w.dedupeLast = nil
		return
	}
	if len(b.dedupeLast) == 0 {
		return
	}
	if w.dedupeLast == nil || len(w.dedupeLast)+len(b.dedupeLast) > dedupeLastMax {
		w.dedupeLast = make(map[dedupeSource]int64, len(b.dedupeLast))
	}
	maps.Copy(w.dedupeLast, b.dedupeLast)
}

// lastDedupeIDs sets each group's last id: its last run's largest.
func (w *writer) lastDedupeIDs(chunk []*dedupeGroup) error {
	args := make([]driver.Value, 0, 2*len(chunk))
	for _, g := range chunk {
		args = append(args, g.src.q, g.src.origin[:])
	}
	dest := make([]driver.Value, len(chunk))
	if err := w.conn.queryRow(lastDedupeSQL[len(chunk)], args, dest); err != nil {
		return fmt.Errorf("read dedupe runs: %w", err)
	}
	for i := range chunk {
		chunk[i].last, chunk[i].hasLast = dest[i].(int64)
	}
	return nil
}

// dedupeInserts gathers the runs a commit inserts, dedupeMaxSources per
// statement.
type dedupeInserts struct {
	w    *writer
	at   int64
	args []driver.Value
	rows int
}

// add inserts ids of src, sorted and distinct, as runs of at most
// maxDedupeRun: the caller knows that no run spans any of them.
func (in *dedupeInserts) add(src dedupeSource, ids []int64) error {
	for len(ids) > 0 {
		run := ids[:min(len(ids), maxDedupeRun)]
		ids = ids[len(run):]
		// Never nil: a run of one is an empty blob, not NULL. Each row's
		// blob is its own: the statement binds them all at once.
		blob := encodeDedupeRun(make([]byte, 0, 2*len(run)), run)
		in.args = append(in.args, src.q, src.origin[:], run[len(run)-1], run[0], in.at, int64(len(run)), blob)
		if in.rows++; in.rows == dedupeMaxSources {
			if err := in.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *dedupeInserts) flush() error {
	if in.rows == 0 {
		return nil
	}
	_, err := in.w.conn.exec(insertDedupeSQL[in.rows], in.args...)
	clear(in.args)
	in.args, in.rows = in.args[:0], 0
	if err != nil {
		return fmt.Errorf("record dedupe keys: %w", err)
	}
	return nil
}

// dedupeRun is one row of dedupe_runs, decoded.
type dedupeRun struct {
	minID, maxID int64
	ids          []int64
}

// runAt returns the run of src that may hold id: the first whose largest
// id is at or past it. ok is false when there is none.
func runAt(rc *rawConn, src dedupeSource, id int64) (r dedupeRun, ok bool, err error) {
	dest := make([]driver.Value, 4)
	err = rc.queryRow(`SELECT min_id, max_id, n, ids FROM dedupe_runs WHERE queue = ? AND origin = ? AND max_id >= ? ORDER BY max_id LIMIT 1`,
		[]driver.Value{src.q, src.origin[:], id}, dest)
	if errors.Is(err, errNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read dedupe runs: %w", err)
	}
	r.minID, _ = dest[0].(int64)
	r.maxID, _ = dest[1].(int64)
	n, _ := dest[2].(int64)
	b, _ := dest[3].([]byte)
	if r.ids, err = decodeDedupeRun(nil, r.minID, r.maxID, n, b); err != nil {
		return r, false, fmt.Errorf("dedupe run %d: %w", r.maxID, err)
	}
	return r, true, nil
}

// recordOlder records ids of src, sorted, distinct and none past its last
// run, marking the new ones in fresh. Each id's run is the first one
// ending at or past it: an id inside the run's span is known if the run
// holds it, and otherwise joins it; an id before the span is new, and the
// ids in that gap make a new run there. Spans stay apart, so the next
// lookup still finds an id's one run.
func (w *writer) recordOlder(src dedupeSource, ids []int64, fresh map[dedupeKey]bool, ins *dedupeInserts) error {
	for len(ids) > 0 {
		r, ok, err := runAt(w.conn, src, ids[0])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("read dedupe runs: no run ends at or past id %d, below the last", ids[0])
		}
		// The ids this run decides: those up to its largest.
		k := firstAfter(ids, r.maxID)
		mine := ids[:k]
		ids = ids[k:]
		gap, _ := slices.BinarySearch(mine, r.minID)
		joined := r.ids
		grew := false
		for _, id := range mine[gap:] {
			if _, held := slices.BinarySearch(r.ids, id); held {
				continue
			}
			fresh[dedupeKey{src.q, src.origin, uint64(id)}] = true
			if !grew {
				joined, grew = slices.Clone(r.ids), true
			}
			joined = append(joined, id)
		}
		for _, id := range mine[:gap] {
			fresh[dedupeKey{src.q, src.origin, uint64(id)}] = true
		}
		if err := ins.add(src, mine[:gap]); err != nil {
			return err
		}
		if grew {
			// The run is written again with the ids that joined it, as one
			// row or, past maxDedupeRun, several, all within its span and
			// recorded now: its older ids stay a little longer.
			slices.Sort(joined)
			if _, err := w.conn.exec(`DELETE FROM dedupe_runs WHERE queue = ? AND origin = ? AND max_id = ?`, src.q, src.origin[:], r.maxID); err != nil {
				return fmt.Errorf("rewrite dedupe run: %w", err)
			}
			if err := ins.add(src, joined); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchTime is the time the current batch records in the dedupe window:
// the clock, but always after the previous batch's, so that the window's
// times grow with its runs even when the clock stands still or steps
// back.
func (w *writer) batchTime() int64 {
	if w.batchAt == 0 {
		w.batchAt = max(w.s.now().UnixNano(), w.lastAt+1)
		w.lastAt = w.batchAt
	}
	return w.batchAt
}

func (b *batch) markFull(r *request) {
	if b.full == nil {
		b.full = map[*request]bool{}
	}
	b.full[r] = true
}

func (b *batch) markDup(r *request, i int) {
	if b.deduped == nil {
		b.deduped = map[*request][]bool{}
	}
	d := b.deduped[r]
	if d == nil {
		d = make([]bool, len(r.puts))
		b.deduped[r] = d
	}
	d[i] = true
}

// Seen reports whether the dedupe window of q holds (origin, id): whether
// a put of that message with Dedupe set was committed to q and not yet
// pruned. A receiver asks before it takes a file's content again, so that
// a file it already delivered is acknowledged instead of sent twice.
func (q *Queue) Seen(ctx context.Context, origin message.NodeID, id uint64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	rc, err := q.s.reader()
	if err != nil {
		return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
	}
	defer q.s.putReader(rc)
	r, ok, err := runAt(rc, dedupeSource{q.id, origin}, int64(id))
	if err != nil {
		return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
	}
	if !ok {
		return false, nil
	}
	_, held := slices.BinarySearch(r.ids, int64(id))
	return held, nil
}
