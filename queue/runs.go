package queue

import (
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// A run is one row of copies that holds several copies of one queue and
// priority: those one commit put there, in id order. A publish to a topic
// with N subscriptions used to insert N rows and its acks to delete N
// more; with runs, a commit of K publishes inserts N rows, and a consumer
// that acks in order rewrites or deletes one row per commit. Row
// operations were most of a publish's cost (see BenchmarkPublish).
//
// A run row's key (queue, priority, id) carries its last copy's id, so a
// refill reading "id > lastLoaded" along the key finds every run that
// still holds a copy it has not loaded. For that, and for ordered reads
// that expand runs in place, the writer keeps runs contiguous: no other
// row of the same queue and priority has an id between a run's first and
// last copy (flushInserts cuts a run at such a row). A run only loses
// copies afterwards, so it stays contiguous.
//
// The items column encodes the copies; n and size hold their count and
// bytes so that counting a queue stays one SQL sum:
//
//	items := count uvarint, then count times:
//	         id-delta  uvarint  id minus the previous copy's id (the first: minus 0)
//	         id-body   uvarint  the copy's id minus its body's id (> 0)
//	         size      uvarint  the body's length in bytes
//	         expires   uvarint  unix nanos, 0 = never
//	         deliveries uvarint failed deliveries so far
//	         notbefore uvarint  unix nanos, 0 = none
//
// expires_at of a run row is the earliest expiry of its copies (0 if none
// expire), so that the expiry sweep finds it along the partial index.

// maxRunLen caps the copies of a run as flushInserts makes them. Every
// change to a run rewrites it whole: an ack of the head of a long run,
// commit after commit, would cost in proportion to its length. 64 copies
// cost a few microseconds to rewrite, and still make one row of what was
// 64.
const maxRunLen = 64

// runItem is one copy of a run.
type runItem struct {
	id, body, size, exp int64
	deliv               int64
	notBf               int64
}

// maxRunItems bounds what a decoder accepts: a commit puts at most
// MaxBatch requests, each of at most this many puts.
const maxRunItems = 1 << 20

// errBadRun is returned for a run that does not decode.
var errBadRun = errors.New("malformed run of copies")

// encodeRun appends items' encoding to dst.
func encodeRun(dst []byte, items []runItem) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	var prev int64
	for _, it := range items {
		dst = binary.AppendUvarint(dst, uint64(it.id-prev))
		dst = binary.AppendUvarint(dst, uint64(it.id-it.body))
		dst = binary.AppendUvarint(dst, uint64(it.size))
		dst = binary.AppendUvarint(dst, uint64(it.exp))
		dst = binary.AppendUvarint(dst, uint64(it.deliv))
		dst = binary.AppendUvarint(dst, uint64(it.notBf))
		prev = it.id
	}
	return dst
}

// decodeRun decodes a run's items, appending them to dst. It checks what
// the writer relies on: ids grow strictly, bodies are positive and older
// than their copy, nothing is negative, and no byte is left over.
func decodeRun(dst []runItem, b []byte) ([]runItem, error) {
	n, k := binary.Uvarint(b)
	// Each item takes six bytes at least.
	if k <= 0 || n == 0 || n > maxRunItems || n > uint64(len(b)-k)/6 {
		return dst, errBadRun
	}
	b = b[k:]
	var prev int64
	var f [6]uint64
	for range n {
		for i := range f {
			v, k := binary.Uvarint(b)
			if k <= 0 || v > 1<<62 {
				return dst, errBadRun
			}
			f[i] = v
			b = b[k:]
		}
		if f[0] == 0 || f[1] == 0 {
			return dst, errBadRun
		}
		id := prev + int64(f[0])
		if id <= prev || int64(f[1]) >= id {
			return dst, errBadRun
		}
		dst = append(dst, runItem{id: id, body: id - int64(f[1]), size: int64(f[2]), exp: int64(f[3]), deliv: int64(f[4]), notBf: int64(f[5])})
		prev = id
	}
	if len(b) != 0 {
		return dst, errBadRun
	}
	return dst, nil
}

// runMeta returns what a run row stores beside its items: its key (the
// last id), its earliest expiry and its bytes.
func runMeta(items []runItem) (key, exp, size int64) {
	for _, it := range items {
		if it.exp > 0 && (exp == 0 || it.exp < exp) {
			exp = it.exp
		}
		size += it.size
	}
	return items[len(items)-1].id, exp, size
}

// runCols is how many values insertRunSQL takes per row.
const runCols = 8

var insertRunSQL = multiRowSQL(`INSERT INTO copies (queue, priority, id, expires_at, items, n, size, body) VALUES `, runCols)

// runArgs appends the insert values of a run of queue q and priority
// prio.
func runArgs(args []driver.Value, q int64, prio uint8, items []runItem, single bool) []driver.Value {
	key, exp, size := runMeta(items)
	body := int64(0)
	if single {
		body = singleRun
	}
	return append(args, q, int64(prio), key, exp, encodeRun(nil, items), int64(len(items)), size, body)
}

// singleRun in the body column of a run says that each of its copies is
// the only copy of its body: the copies of single puts, the most of a
// store. The writer counts the copies of shared bodies at open, and skips
// these runs (see loadTotals). A run only loses copies, so the mark stays
// true; 0 says nothing. refillSQL spells the value out.
const singleRun int64 = -1

// run is a run row as the writer edits it.
type run struct {
	q     int64
	prio  uint8
	key   int64
	items []runItem
}

// find returns the index of id in the run's items.
func (r *run) find(id int64) (int, bool) {
	return slices.BinarySearchFunc(r.items, id, func(it runItem, id int64) int {
		switch {
		case it.id < id:
			return -1
		case it.id > id:
			return 1
		}
		return 0
	})
}

// runFrom reads the first run of queue q and priority prio whose key is
// id or more: the one that holds id, if any does. ok is false when there
// is none. The items are the caller's to change.
//
// A consumer that acks one copy at a time, as an MQTT subscriber's
// PUBACKs do, acks a few copies of the same run in each commit, and
// reading the run back before each rewrite was a fifth of those commits'
// cost. So the run the writer last read or saved for a queue and
// priority is kept (lastRuns) and answers again while it holds id. That
// is sound because the writer is the only one that changes runs, and
// every change goes through save, deleteWholeRun or a queue's drop, which
// keep lastRuns true: new runs only ever take ids past every run's, and
// runs only lose copies, so none can come to hold an id between a kept
// run's first and last copy. A batch that rolls back forgets them all.
func (w *writer) runFrom(q int64, prio uint8, id int64) (r run, ok bool, err error) {
	k := plainKey{q, prio}
	if c, ok := w.lastRuns[k]; ok && c.items[0].id <= id && id <= c.key {
		c.items = slices.Clone(c.items)
		return c, true, nil
	}
	w.runReads.Add(1)
	dest := make([]driver.Value, 2)
	err = w.conn.queryRow(`SELECT id, items FROM copies WHERE queue = ? AND priority = ? AND id >= ? ORDER BY id LIMIT 1`,
		[]driver.Value{q, int64(prio), id}, dest)
	if errors.Is(err, errNoRows) {
		return run{}, false, nil
	}
	if err != nil {
		return run{}, false, err
	}
	r = run{q: q, prio: prio}
	r.key, _ = dest[0].(int64)
	blob, _ := dest[1].([]byte)
	if r.items, err = decodeRun(nil, blob); err != nil {
		return run{}, false, fmt.Errorf("run %d of queue %d: %w", r.key, q, err)
	}
	w.keepRun(r)
	return r, true, nil
}

// lastRunsMax bounds lastRuns: past it, the map starts again empty. A
// kept run costs at most maxRunLen items for a queue and priority where
// a consumer acks one copy at a time.
const lastRunsMax = 256

// keepRun records r as the run of its queue and priority that the writer
// last read or saved, with items of its own.
func (w *writer) keepRun(r run) {
	if w.lastRuns == nil || len(w.lastRuns) >= lastRunsMax {
		w.lastRuns = make(map[plainKey]run)
	}
	r.items = slices.Clone(r.items)
	w.lastRuns[plainKey{r.q, r.prio}] = r
}

// forgetRun drops the kept run of q and prio if its key is key: the run
// is gone.
func (w *writer) forgetRun(q int64, prio uint8, key int64) {
	k := plainKey{q, prio}
	if c, ok := w.lastRuns[k]; ok && c.key == key {
		delete(w.lastRuns, k)
	}
}

// runOf returns the run that holds copy id of queue q and priority prio.
func (w *writer) runOf(q int64, prio uint8, id int64) (run, int, bool, error) {
	r, ok, err := w.runFrom(q, prio, id)
	if err != nil || !ok {
		return run{}, 0, false, err
	}
	i, ok := r.find(id)
	return r, i, ok, nil
}

// save writes r back after its items changed: deleted when it has none
// left, updated in place, or moved to its new key when its last copy
// went.
func (w *writer) save(r run) error {
	var err error
	if len(r.items) == 0 {
		_, err = w.conn.exec(`DELETE FROM copies WHERE queue = ? AND priority = ? AND id = ?`, r.q, int64(r.prio), r.key)
	} else {
		key, exp, size := runMeta(r.items)
		_, err = w.conn.exec(`UPDATE copies SET id = ?, expires_at = ?, items = ?, n = ?, size = ? WHERE queue = ? AND priority = ? AND id = ?`,
			key, exp, encodeRun(nil, r.items), int64(len(r.items)), size, r.q, int64(r.prio), r.key)
	}
	if err != nil {
		return fmt.Errorf("rewrite run %d of queue %d: %w", r.key, r.q, err)
	}
	if len(r.items) == 0 {
		w.forgetRun(r.q, r.prio, r.key)
	} else {
		// Under its new key: a run whose last copy went moved to the one
		// before.
		r.key = r.items[len(r.items)-1].id
		w.keepRun(r)
	}
	return nil
}

// plainKey is a queue and priority, for the rows a batch puts there that
// are not copies.
type plainKey struct {
	q    int64
	prio uint8
}

// plainRow records that the batch put a row other than a copy at id in
// queue q, priority prio, so that flushInserts does not let a run span
// it: rows it inserts itself (moves), and, once the batch has copies,
// the rows of messages waiting in pending.
func (w *writer) plainRow(q int64, prio uint8, id int64) {
	if w.plain == nil {
		w.plain = map[plainKey][]int64{}
	}
	k := plainKey{q, prio}
	w.plain[k] = append(w.plain[k], id)
}

// scanRuns calls fn with each run row that query returns as (queue,
// priority, id, items), decoded.
func scanRuns(scan func(query string, args []driver.Value, cols int, fn func([]driver.Value) bool) (int, bool, error),
	query string, args []driver.Value, fn func(r run) error) error {
	var ferr error
	var items []runItem
	_, _, err := scan(query, args, 4, func(row []driver.Value) bool {
		q, _ := row[0].(int64)
		prio, _ := row[1].(int64)
		key, _ := row[2].(int64)
		blob, _ := row[3].([]byte)
		var err error
		if items, err = decodeRun(items[:0], blob); err != nil {
			ferr = fmt.Errorf("run %d of queue %d: %w", key, q, err)
			return false
		}
		if ferr = fn(run{q: q, prio: uint8(prio), key: key, items: items}); ferr != nil {
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	return ferr
}
