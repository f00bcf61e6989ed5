package queue

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
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

// The dedupe window is kept in runs: the ids that one commit accepted into
// one queue from one origin, at most maxDedupeRun of them, in one row of
// dedupe_runs keyed by (queue, origin, the largest id). A row per key made
// its insert the costliest part of storing what a remote client or a link
// sends, about as much as storing the message. Ids are ordered as SQLite
// orders them, as int64; ids holds the run past its smallest, which
// min_id holds:
//
//	ids := (n-1) times: delta uvarint  an id minus the one before it, as
//	                                   uint64 (modulo 2^64), > 0
//
// A stream of a producer's messages has ids that grow, so the lookup of a
// commit's keys finds no run that ends at or past its smallest one: one
// index probe. A resend finds the runs that may hold it and reads them.

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
	fresh, err := w.recordKeys(keys)
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
// were not there before: it reads the runs that may hold the keys' ids,
// for up to dedupeMaxSources queues and origins per statement, and inserts
// the new ids as runs, up to dedupeMaxSources per statement. A commit
// that brings a few messages for each of a thousand queues makes as few
// statements as one that brings them all for one.
func (w *writer) recordKeys(keys []dedupeKey) (map[dedupeKey]bool, error) {
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
		g.known = make([]bool, len(g.ids))
	}
	for rest := groups; len(rest) > 0; {
		chunk := rest[:min(len(rest), dedupeMaxSources)]
		rest = rest[len(chunk):]
		if err := w.markKnownIDs(chunk, index, groups); err != nil {
			return nil, err
		}
	}
	now := w.batchTime()
	args := w.scratch[:0]
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		_, err := w.conn.exec(insertDedupeSQL[rows], args...)
		args, rows = args[:0], 0
		return err
	}
	for _, g := range groups {
		add := g.ids[:0]
		for i, id := range g.ids {
			if !g.known[i] {
				fresh[dedupeKey{g.src.q, g.src.origin, uint64(id)}] = true
				add = append(add, id)
			}
		}
		for len(add) > 0 {
			run := add[:min(len(add), maxDedupeRun)]
			add = add[len(run):]
			// Never nil: a run of one is an empty blob, not NULL. Each
			// row's blob is its own: the statement binds them all at once.
			blob := encodeDedupeRun(make([]byte, 0, 2*len(run)), run)
			args = append(args, g.src.q, g.src.origin[:], run[len(run)-1], run[0], now, int64(len(run)), blob)
			if rows++; rows == dedupeMaxSources {
				if err := flush(); err != nil {
					return nil, fmt.Errorf("record dedupe keys: %w", err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("record dedupe keys: %w", err)
	}
	clear(args[:cap(args)])
	w.scratch = args[:0]
	return fresh, nil
}

// dedupeGroup is the ids of one queue and origin in a commit, sorted and
// distinct, and which of them the window holds already.
type dedupeGroup struct {
	src   dedupeSource
	ids   []int64
	known []bool
}

// dedupeMaxSources is how many queues and origins one dedupe lookup reads,
// and how many runs one insert writes.
const dedupeMaxSources = 32

// knownDedupeSQL[n] reads the runs that may hold the ids of n groups;
// insertDedupeSQL[n] inserts n runs.
var knownDedupeSQL, insertDedupeSQL = func() ([]string, []string) {
	known := make([]string, dedupeMaxSources+1)
	insert := make([]string, dedupeMaxSources+1)
	for n := 1; n <= dedupeMaxSources; n++ {
		known[n] = `SELECT queue, origin, min_id, max_id, n, ids FROM dedupe_runs WHERE ` +
			strings.TrimSuffix(strings.Repeat(`(queue = ? AND origin = ? AND max_id >= ? AND min_id <= ?) OR `, n), ` OR `)
		insert[n] = `INSERT INTO dedupe_runs (queue, origin, max_id, min_id, at, n, ids) VALUES ` + valuesSQL(n, 7)
	}
	return known, insert
}()

// markKnownIDs marks, in each group of chunk, the ids that the window
// holds: those of the runs that end at or past the group's smallest id and
// begin at or before its largest. index finds a row's group in groups.
func (w *writer) markKnownIDs(chunk []dedupeGroup, index map[dedupeSource]int, groups []dedupeGroup) error {
	args := make([]driver.Value, 0, 4*len(chunk))
	for _, g := range chunk {
		args = append(args, g.src.q, g.src.origin[:], g.ids[0], g.ids[len(g.ids)-1])
	}
	var derr error
	_, _, err := w.conn.scan(knownDedupeSQL[len(chunk)], args, 6, func(row []driver.Value) bool {
		var src dedupeSource
		src.q, _ = row[0].(int64)
		origin, _ := row[1].([]byte)
		copy(src.origin[:], origin)
		i, ok := index[src]
		if !ok || len(origin) != len(src.origin) {
			return true // a row of another group's terms cannot match; keep reading
		}
		minID, _ := row[2].(int64)
		maxID, _ := row[3].(int64)
		n, _ := row[4].(int64)
		b, _ := row[5].([]byte)
		if w.dedupeIDs, derr = decodeDedupeRun(w.dedupeIDs[:0], minID, maxID, n, b); derr != nil {
			return false
		}
		markKnown(groups[i].known, groups[i].ids, w.dedupeIDs)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("read dedupe runs: %w", err)
	}
	return nil
}

// markKnown sets known[i] for each ids[i] that run holds; both are sorted.
func markKnown(known []bool, ids, run []int64) {
	i := sort.Search(len(ids), func(i int) bool { return ids[i] >= run[0] })
	j := 0
	for i < len(ids) && j < len(run) {
		switch {
		case ids[i] < run[j]:
			i++
		case ids[i] > run[j]:
			j++
		default:
			known[i] = true
			i++
			j++
		}
	}
}

// batchTime is the time the current batch records in the dedupe window:
// the clock, but always after the previous batch's, so that it tells this
// batch's rows from older ones even when the clock stands still or steps
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
	rows, err := q.s.rdb.QueryContext(ctx, `SELECT min_id, max_id, n, ids FROM dedupe_runs WHERE queue = ? AND origin = ? AND max_id >= ? AND min_id <= ?`,
		q.id, origin[:], int64(id), int64(id))
	if err != nil {
		return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
	}
	defer rows.Close()
	var run []int64
	for rows.Next() {
		var minID, maxID, n int64
		var b []byte
		if err := rows.Scan(&minID, &maxID, &n, &b); err != nil {
			return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
		}
		if run, err = decodeDedupeRun(run[:0], minID, maxID, n, b); err != nil {
			return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
		}
		if _, ok := slices.BinarySearch(run, int64(id)); ok {
			return true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
	}
	return false, nil
}
