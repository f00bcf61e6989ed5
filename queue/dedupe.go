package queue

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

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
// were not there before: for each queue and origin, it reads the runs that
// may hold the keys' ids and inserts the new ones as runs.
func (w *writer) recordKeys(keys []dedupeKey) (map[dedupeKey]bool, error) {
	fresh := make(map[dedupeKey]bool, len(keys))
	bySource := map[dedupeSource][]int64{}
	var sources []dedupeSource
	for _, k := range keys {
		src := dedupeSource{k.q, k.origin}
		ids, ok := bySource[src]
		if !ok {
			sources = append(sources, src)
		}
		bySource[src] = append(ids, int64(k.id))
	}
	now := w.batchTime()
	for _, src := range sources {
		ids := bySource[src]
		slices.Sort(ids)
		ids = slices.Compact(ids)
		known, err := w.knownIDs(src, ids)
		if err != nil {
			return nil, err
		}
		add := ids[:0]
		for i, id := range ids {
			if !known[i] {
				fresh[dedupeKey{src.q, src.origin, uint64(id)}] = true
				add = append(add, id)
			}
		}
		for len(add) > 0 {
			run := add[:min(len(add), maxDedupeRun)]
			add = add[len(run):]
			if w.dedupeBlob == nil {
				w.dedupeBlob = make([]byte, 0, 64) // never nil: a run of one is an empty blob, not NULL
			}
			w.dedupeBlob = encodeDedupeRun(w.dedupeBlob[:0], run)
			if _, err := w.conn.exec(`INSERT INTO dedupe_runs (queue, origin, max_id, min_id, at, n, ids) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				src.q, src.origin[:], run[len(run)-1], run[0], now, int64(len(run)), w.dedupeBlob); err != nil {
				return nil, fmt.Errorf("record %d dedupe keys: %w", len(run), err)
			}
		}
	}
	return fresh, nil
}

// knownIDs reports which of ids, sorted and distinct, the dedupe window
// of src holds: the runs that end at or past the smallest and begin at or
// before the largest.
func (w *writer) knownIDs(src dedupeSource, ids []int64) ([]bool, error) {
	var known []bool
	var derr error
	_, _, err := w.conn.scan(`SELECT min_id, max_id, n, ids FROM dedupe_runs WHERE queue = ? AND origin = ? AND max_id >= ? AND min_id <= ?`,
		[]driver.Value{src.q, src.origin[:], ids[0], ids[len(ids)-1]}, 4, func(row []driver.Value) bool {
			minID, _ := row[0].(int64)
			maxID, _ := row[1].(int64)
			n, _ := row[2].(int64)
			b, _ := row[3].([]byte)
			if w.dedupeIDs, derr = decodeDedupeRun(w.dedupeIDs[:0], minID, maxID, n, b); derr != nil {
				return false
			}
			if known == nil {
				known = make([]bool, len(ids))
			}
			markKnown(known, ids, w.dedupeIDs)
			return true
		})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("read dedupe runs: %w", err)
	}
	if known == nil {
		known = make([]bool, len(ids))
	}
	return known, nil
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
