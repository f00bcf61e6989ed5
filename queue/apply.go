package queue

import (
	"cmp"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/petrelmq/petrel/internal/logkey"
)

// batch collects what one transaction did, to publish after its commit.
type batch struct {
	appends  []appendEffect
	deltas   map[*Queue]*counters
	created  []*Queue
	done     []*request
	settles  []*request // requests that settle leases; see Queue.settled
	parked   []*request
	rejected map[*request]error
	deduped  map[*request][]bool // set by admit: puts that are duplicates
	full     map[*request]bool   // set by admit: puts past the store's limits
	thaws    []*frozenQueue      // queues frozen by purges and moves; see freeze
	dropped  map[*Queue]bool     // queues this batch drops; see applyDrop
	counters counterWrite        // how writeCounters wrote deltas
	stored   []storedBody        // shared bodies the batch stored
	freed    []int64             // shared bodies the batch freed
	// dedupeLast is each queue and origin's last dedupe id once the batch
	// commits, for the writer's cache (see recordKeys); dedupeForget says
	// the batch deleted runs, and the cache must be forgotten instead.
	dedupeLast   map[dedupeSource]int64
	dedupeForget bool
}

type storedBody struct {
	id int64
	sh *bodyData
}

type appendEffect struct {
	q    *Queue
	prio uint8
	e    entry
}

// counterWrite is how a batch's counters were written (counterlog.go).
type counterWrite uint8

const (
	counterRows   counterWrite = iota // to the queues' rows
	counterLogged                     // as a row of counter_log
	counterFolded                     // to the rows, with the log folded
)

func newBatch() *batch {
	return &batch{deltas: map[*Queue]*counters{}}
}

func (b *batch) delta(q *Queue) *counters {
	d := b.deltas[q]
	if d == nil {
		d = &counters{}
		b.deltas[q] = d
	}
	return d
}

// The writer counts the copies of each body in refs, which holds only
// the bodies with more than one: a body missing from it has one copy, as
// the body of every single put has, so that a backlog of sends costs no
// memory per message here. The counts change in place, most of them by an
// index into a window of recent ids (see refCounts), and each change is
// logged with the count before it so that a batch that rolls back undoes
// it (undoRefs).

// refsOf returns body's count of copies.
func (w *writer) refsOf(body int64) int32 { return w.refs.get(body) }

// setRefs sets body's count of copies: 0 for a body freed or never made.
func (w *writer) setRefs(body int64, n int32) { w.refs.set(body, n) }

// newBody counts the n copies of a body the batch made.
func (w *writer) newBody(body int64, n int32) {
	w.refLog = append(w.refLog, refChange{body, 0})
	w.setRefs(body, n)
}

// refChange is a body's count of copies before a change.
type refChange struct {
	body int64
	prev int32
}

// unref counts one copy of body deleted; the last one frees the body in
// the same transaction.
func (w *writer) unref(body int64) {
	prev := w.refsOf(body)
	w.refLog = append(w.refLog, refChange{body, prev})
	if prev > 1 {
		w.setRefs(body, prev-1)
		return
	}
	w.frees = append(w.frees, body)
}

// undoRefs reverts the reference changes of a batch that rolled back.
func (w *writer) undoRefs() {
	for i := len(w.refLog) - 1; i >= 0; i-- {
		c := w.refLog[i]
		w.setRefs(c.body, c.prev)
	}
	w.refLog = w.refLog[:0]
}

// freeRange turns the bodies that acks, a whole run deleted, freed into
// one range, when that range holds nothing else: each copy is its body's
// only one, put just after it (a single put takes two ids in a row, its
// body's and its copy's), and the copies came one after the other. Every
// id between the first body and the last is then one of those bodies or
// one of the run's copies, which are no body. One ranged delete walks the
// bodies' leaf pages in order; a list of ids is one seek each, after
// SQLite sorted the list into a temporary b-tree. The frees of acks are
// those from start on.
func (w *writer) freeRange(acks []ackRow, start int) {
	if len(w.frees)-start != len(acks) || len(acks) < 2 {
		return
	}
	for i, a := range acks {
		if a.ref.body != a.ref.rowid-1 || i > 0 && a.ref.rowid != acks[i-1].ref.rowid+2 {
			return
		}
	}
	w.freedRanges = append(w.freedRanges, bodyRange{lo: acks[0].ref.body, hi: acks[len(acks)-1].ref.body, n: int64(len(acks))})
	w.freedInRanges = append(w.freedInRanges, w.frees[start:]...)
	w.frees = w.frees[:start]
}

// bodyRange is a range of body ids that holds n bodies and no other.
type bodyRange struct{ lo, hi, n int64 }

// flushFrees deletes the bodies whose last copy the batch deleted.
func (w *writer) flushFrees(b *batch) error {
	for _, r := range w.freedRanges {
		n, err := w.conn.exec(`DELETE FROM bodies WHERE id BETWEEN ? AND ?`, r.lo, r.hi)
		if err != nil {
			return fmt.Errorf("free bodies %d to %d: %w", r.lo, r.hi, err)
		}
		if n != r.n {
			w.s.log.Warn("freed a range of bodies that did not hold what its copies said", slog.Int64("from", r.lo), slog.Int64("to", r.hi), slog.Int64("want", r.n), slog.Int64("deleted", n))
		}
	}
	w.rangeFrees.Add(int64(len(w.freedRanges)))
	w.freedRanges = w.freedRanges[:0]
	b.freed = append(b.freed, w.freedInRanges...)
	w.freedInRanges = w.freedInRanges[:0]
	b.freed = append(b.freed, w.frees...)
	for rest := w.frees; len(rest) > 0; {
		n := min(len(rest), deleteMaxRows)
		args := w.scratch[:0]
		for _, id := range rest[:n] {
			args = append(args, id)
		}
		w.scratch = args
		if _, err := w.conn.exec(deleteBodySQL[n], args...); err != nil {
			return fmt.Errorf("free %d shared bodies: %w", n, err)
		}
		rest = rest[n:]
	}
	w.frees = w.frees[:0]
	return nil
}

// dataKey tells puts that share their encoded bytes: a topic's publish
// hands every subscription's put the same slice.
type dataKey struct {
	p *byte
	n int
}

func keyOf(data []byte) dataKey {
	if len(data) == 0 {
		return dataKey{}
	}
	return dataKey{&data[0], len(data)}
}

// sharedBody is one byte slice of a put request, the puts that store it
// and, once stored, its body's id.
type sharedBody struct {
	key  dataKey
	n    int
	id   int64
	refs int32 // copies made of it
	sh   *bodyData
}

// putBodies are the distinct byte slices of one put request.
type putBodies struct {
	list []sharedBody
	// at indexes list once it is longer than putBodiesScan: a request of
	// many distinct messages (a link's batch) would make find quadratic.
	at map[dataKey]int
}

// putBodiesScan is the longest list find scans. A publish holds few
// distinct slices (one for its subscriptions, one per next hop).
const putBodiesScan = 8

// sharedBodies counts, for each distinct byte slice of r's puts that
// kept accepts, the puts that store it.
func (w *writer) sharedBodies(r *request, kept func(int, Put) bool) putBodies {
	var bs putBodies
	for i, p := range r.puts {
		if !kept(i, p) {
			continue
		}
		k := keyOf(p.Data)
		if k.p == nil {
			continue // no bytes: a plain row
		}
		if j := bs.find(k); j >= 0 {
			bs.list[j].n++
			continue
		}
		bs.list = append(bs.list, sharedBody{key: k, n: 1})
		switch {
		case bs.at != nil:
			bs.at[k] = len(bs.list) - 1
		case len(bs.list) > putBodiesScan:
			bs.at = make(map[dataKey]int, len(r.puts))
			for j, b := range bs.list {
				bs.at[b.key] = j
			}
		}
	}
	return bs
}

func (bs *putBodies) find(k dataKey) int {
	if bs.at != nil {
		if j, ok := bs.at[k]; ok {
			return j
		}
		return -1
	}
	for i := range bs.list {
		if bs.list[i].key == k {
			return i
		}
	}
	return -1
}

// copyRow is a copy waiting to be inserted.
type copyRow struct {
	q    int64
	prio uint8
	id   int64
	exp  int64
	body int64
	size int64
	// ai is the index of the copy's append in its batch, where
	// flushInserts records the copy's run.
	ai int
	// single says the copy is its body's only one.
	single bool
}

func (b *batch) reject(r *request, err error) {
	if b.rejected == nil {
		b.rejected = map[*request]error{}
	}
	b.rejected[r] = err
}

// fullAfter reports whether storing n more messages of size bytes, after
// msgs messages of pending bytes, would pass the configured limits.
func (w *writer) fullAfter(msgs, pending, n, size int64) bool {
	c := w.s.cfg
	if c.MaxMessages > 0 && w.msgs.Load()+msgs+n > c.MaxMessages {
		return true
	}
	return c.MaxBytes > 0 && w.bytes.Load()+pending+size > c.MaxBytes
}

// applyPut stores r's messages, or parks r (FullBlock) or rejects it
// (FullError) when the store is past its limits.
func (w *writer) applyPut(r *request, b *batch) (parked bool, err error) {
	size := putBytes(r)
	if b.full[r] {
		if w.s.cfg.OnFull == FullBlock {
			b.parked = append(b.parked, r)
			return true, nil
		}
		b.reject(r, fmt.Errorf("put %d messages (%d bytes): %w", len(r.puts), size, ErrStoreFull))
		return false, nil
	}
	for _, p := range r.puts {
		if _, reject := w.skipPut(r, p, b); reject {
			return false, nil
		}
	}
	now := w.s.now().UnixNano()
	deduped := b.deduped[r]
	kept := func(i int, p Put) bool {
		if skip, _ := w.skipPut(r, p, b); skip {
			return false
		}
		return !p.Dedupe || deduped == nil || !deduped[i]
	}
	// Every put is a copy of a stored body, and puts of one request that
	// share their bytes share that body. A body and its share of a run
	// cost fewer b-tree changes than a messages row and its index entry,
	// to put and to ack (see "Storage, and why" in the README).
	shared := w.sharedBodies(r, kept)
	for i, p := range r.puts {
		q := p.Queue
		if skip, _ := w.skipPut(r, p, b); skip {
			continue
		}
		if p.Dedupe {
			if deduped != nil && deduped[i] {
				b.delta(q).deduped++
				continue
			}
			b.delta(q).dedupeEntries++
		}
		if p.Optional {
			// A subscription at its bound (SetMaxDepth) drops the copy,
			// counted; its message stays remembered for the dedupe
			// above. q.c is written by this goroutine alone.
			if m := q.maxDepth.Load(); m > 0 && q.c.depth+b.delta(q).depth >= m {
				b.delta(q).overflowed++
				continue
			}
		}
		var exp int64
		if p.Msg.TTL > 0 {
			exp = now + int64(p.Msg.TTL)
		}
		e := entry{expiresAt: exp, data: p.Data}
		if j := shared.find(keyOf(p.Data)); j >= 0 {
			sb := &shared.list[j]
			if sb.id == 0 {
				w.lastRow++
				sb.id = w.lastRow
				w.pendingBodies = append(w.pendingBodies, sb.id, p.Data)
				if sb.n > 1 {
					// Shared: its copies decode it once (see
					// Delivery.shared), and the cache keeps it for
					// those whose queue reads it back. A single
					// copy's entry holds the bytes alone.
					sb.sh = &bodyData{id: sb.id, data: p.Data}
					b.stored = append(b.stored, storedBody{sb.id, sb.sh})
				}
			}
			sb.refs++
			w.lastRow++
			e.rowid, e.body, e.sh = w.lastRow, sb.id, sb.sh
			w.pendingCopies = append(w.pendingCopies, copyRow{q: q.id, prio: p.Msg.Priority, id: e.rowid, exp: exp, body: sb.id, size: int64(len(p.Data)), ai: len(b.appends), single: sb.n == 1})
		} else {
			w.lastRow++
			e.rowid = w.lastRow
			w.pending = append(w.pending, e.rowid, q.id, int64(p.Msg.Priority), exp, p.Data)
		}
		b.appends = append(b.appends, appendEffect{q: q, prio: p.Msg.Priority, e: e})
		d := b.delta(q)
		d.depth++
		d.bytes += int64(len(p.Data))
		d.enqueued++
	}
	for _, sb := range shared.list {
		if sb.refs > 0 {
			w.newBody(sb.id, sb.refs)
		}
	}
	if r.name != "" {
		// SubmitMarked's key, in the puts' transaction.
		return false, w.setMeta(r.name, r.data)
	}
	return false, nil
}

// applyAck queues r's delete for flushAcks.
func (w *writer) applyAck(r *request) {
	if r.gathered && !r.taken {
		// The request keeps what it took, for a retry of it alone after
		// its batch failed (see run).
		r.acks, r.taken = r.q.takeAcks(), true
	}
	if r.acks != nil || r.gathered {
		// Flushed as they are, one queue's: copying every queue's into
		// one array was a tenth of a fan-out's cost per copy.
		if len(r.acks) > 0 {
			w.ackSets = append(w.ackSets, r.acks)
		}
		return
	}
	w.acks = append(w.acks, ackRow{q: r.q, ref: r.ref})
}

type ackRow struct {
	q   *Queue
	ref ref
	// For a copy: its run as its entry knew it, and what its run item
	// holds besides ref (see deleteWholeRun). run is 0 when unknown.
	run, exp, deliv, notBf int64
	runLen                 int
}

// ackOf is the ack of the delivery that held lease l of q.
func ackOf(q *Queue, l *lease) ackRow {
	e := &l.e
	return ackRow{q: q, ref: refOf(*e, l.prio), run: e.run, runLen: e.runLen, exp: e.expiresAt, deliv: int64(e.deliveries), notBf: e.notBefore}
}

const deleteMaxRows = 64

// deleteSQL[n] deletes n rows by id; deleteBodySQL[n] n bodies.
var (
	deleteSQL     = inListSQL(`DELETE FROM messages WHERE id IN `, ``)
	deleteBodySQL = inListSQL(`DELETE FROM bodies WHERE id IN `, ``)
)

func inListSQL(prefix, suffix string) []string {
	out := make([]string, deleteMaxRows+1)
	for n := 1; n <= deleteMaxRows; n++ {
		out[n] = prefix + valuesSQL(1, n) + suffix
	}
	return out
}

// flushAcks deletes the acked rows, many per statement, queue by queue:
// rows of messages by id, copies by taking them out of their runs. The
// acks are sorted first: those of a topic's subscriptions arrive
// interleaved, and one statement per ack cost several times what the
// deletes did.
func (w *writer) flushAcks(b *batch) error {
	sets := w.ackSets
	if len(w.acks) > 0 {
		sets = append(sets, w.acks)
	}
	w.acks = w.acks[:0]
	for _, acks := range sets {
		if err := w.flushAckSet(b, acks); err != nil {
			return err
		}
	}
	clear(sets)
	w.ackSets = sets[:0]
	return nil
}

// flushAckSet flushes one set of acks: one request's, or those of
// requests that ack one row each. Sets of the same queue are flushed one
// after the other, each finding its copies' runs, which the writer keeps
// from one to the next (see runFrom).
func (w *writer) flushAckSet(b *batch, acks []ackRow) error {
	if !ackGrouped(acks) {
		slices.SortFunc(acks, func(x, y ackRow) int {
			return cmp.Or(cmp.Compare(x.q.id, y.q.id), compareAck(x, y))
		})
	}
	for len(acks) > 0 {
		a0 := acks[0]
		q, isCopy := a0.q, a0.ref.body != 0
		n := 0
		if isCopy {
			// Every ack of this queue and priority: flushCopyAcks takes
			// them out run by run.
			for n < len(acks) && acks[n].q == q && acks[n].ref.body != 0 && acks[n].ref.prio == a0.ref.prio {
				n++
			}
			if err := w.flushCopyAcks(b, acks[:n]); err != nil {
				return err
			}
			acks = acks[n:]
			continue
		}
		for n < len(acks) && n < deleteMaxRows && acks[n].q == q && acks[n].ref.body == 0 {
			n++
		}
		chunk := acks[:n]
		acks = acks[n:]
		args := w.scratch[:0]
		var size int64
		for _, a := range chunk {
			args = append(args, a.ref.rowid)
			size += a.ref.size
		}
		w.scratch = args
		changed, err := w.conn.exec(deleteSQL[n], args...)
		if err != nil {
			return fmt.Errorf("ack %d messages in %q: %w", n, q.name, err)
		}
		d := b.delta(q)
		d.acked += changed
		if changed == int64(n) {
			d.depth -= changed
			d.bytes -= size
			continue
		}
		if err := w.goneAcks(q, d, n, changed); err != nil {
			return err
		}
	}
	return nil
}

// compareAck orders two acks of one queue: messages, then copies by
// priority, each by id.
func compareAck(x, y ackRow) int {
	return cmp.Or(cmp.Compare(min(x.ref.body, 1), min(y.ref.body, 1)), cmp.Compare(x.ref.prio, y.ref.prio), cmp.Compare(x.ref.rowid, y.ref.rowid))
}

// ackGrouped reports whether acks already come as flushAcks needs them:
// each queue's together and in compareAck order. Acks a queue gathered
// (see Queue.ack) mostly do, and sorting them all was a tenth of a
// fan-out's writer time.
func ackGrouped(acks []ackRow) bool {
	var seen []*Queue
	for i, a := range acks {
		if i > 0 && a.q == acks[i-1].q {
			if compareAck(acks[i-1], a) >= 0 {
				return false
			}
			continue
		}
		if slices.Contains(seen, a.q) || len(seen) == 64 {
			return false
		}
		seen = append(seen, a.q)
	}
	return true
}

// flushCopyAcks takes acked copies of one queue and priority, sorted by
// id, out of their runs: a consumer that acks in order touches one or two
// runs per commit, whatever the number of copies.
func (w *writer) flushCopyAcks(b *batch, acks []ackRow) error {
	q, prio := acks[0].q, acks[0].ref.prio
	d := b.delta(q)
	total := len(acks)
	var found int64
	for len(acks) > 0 {
		k, err := w.deleteWholeRun(q, prio, acks)
		if err != nil {
			return fmt.Errorf("ack in %q: %w", q.name, err)
		}
		if k > 0 {
			start := len(w.frees)
			for _, a := range acks[:k] {
				d.depth--
				d.bytes -= a.ref.size
				w.unref(a.ref.body)
			}
			w.freeRange(acks[:k], start)
			found += int64(k)
			acks = acks[k:]
			continue
		}
		r, ok, err := w.runFrom(q.id, prio, acks[0].ref.rowid)
		if err != nil {
			return fmt.Errorf("ack in %q: %w", q.name, err)
		}
		if !ok {
			break
		}
		// Walk the run and the acks it may hold together, both sorted.
		kept := r.items[:0]
		i := 0
		for _, it := range r.items {
			for i < len(acks) && acks[i].ref.rowid < it.id {
				i++ // not in this run: gone already
			}
			if i < len(acks) && acks[i].ref.rowid == it.id {
				i++
				found++
				d.depth--
				d.bytes -= it.size
				w.unref(it.body)
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) < len(r.items) {
			r.items = kept
			if err := w.save(r); err != nil {
				return fmt.Errorf("ack in %q: %w", q.name, err)
			}
		}
		for i < len(acks) && acks[i].ref.rowid <= r.key {
			i++
		}
		acks = acks[i:]
	}
	d.acked += found
	if found < int64(total) {
		return w.goneAcks(q, d, total, found)
	}
	return nil
}

// deleteWholeRun deletes the run that acks begins with when acks ack it
// whole, and returns how many acks that took, 0 if it did not. A
// consumer that keeps pace acks most runs whole, and reading each before
// deleting it was most of the writer's cost of acking copies.
//
// The acks tell the run: those that begin acks and name one run, as long
// as their entries knew it, ending at its key. They can be wrong about
// it: a copy of the run may have gone (moved, expired) or changed
// (nacked) since. So the delete matches the run's items too, encoded from
// the acks as the run row holds them: it deletes a row that holds those
// copies, exactly, or nothing; flushCopyAcks then reads the run.
func (w *writer) deleteWholeRun(q *Queue, prio uint8, acks []ackRow) (int, error) {
	key, n := acks[0].run, acks[0].runLen
	if key == 0 || n < 1 || n > len(acks) || acks[n-1].run != key || acks[n-1].ref.rowid != key {
		return 0, nil
	}
	items := w.ackItems[:0]
	for _, a := range acks[:n] {
		items = append(items, runItem{id: a.ref.rowid, body: a.ref.body, size: a.ref.size, exp: a.exp, deliv: a.deliv, notBf: a.notBf})
	}
	w.ackItems = items
	w.ackBlob = encodeRun(w.ackBlob[:0], items)
	deleted, err := w.conn.exec(`DELETE FROM copies WHERE queue = ? AND priority = ? AND id = ? AND items = ?`, q.id, int64(prio), key, w.ackBlob)
	if err != nil || deleted == 0 {
		return 0, err
	}
	w.forgetRun(q.id, prio, key)
	w.wholeRuns.Add(1)
	return n, nil
}

// goneAcks handles acks of rows that were gone. A lease makes each ack
// unique, so this is a bug elsewhere; keep the counters true rather than
// guess.
func (w *writer) goneAcks(q *Queue, d *counters, acked int, deleted int64) error {
	w.s.log.Warn("acked messages were already gone", slog.String(logkey.Queue, q.name), slog.Int("acked", acked), slog.Int64("deleted", deleted))
	return w.resync(q, d)
}

// queueSizeSQL counts a queue's rows and bytes, copies included.
const queueSizeSQL = `SELECT
	(SELECT count(*) FROM messages WHERE queue = ?1) + (SELECT coalesce(sum(n), 0) FROM copies WHERE queue = ?1),
	(SELECT coalesce(sum(length(data)), 0) FROM messages WHERE queue = ?1) +
	(SELECT coalesce(sum(size), 0) FROM copies WHERE queue = ?1)`

// resync sets q's pending depth and bytes deltas so that after the commit
// its counters equal what the tables hold.
func (w *writer) resync(q *Queue, d *counters) error {
	dest := make([]driver.Value, 2)
	if err := w.conn.queryRow(queueSizeSQL, []driver.Value{q.id}, dest); err != nil {
		return fmt.Errorf("recount %q: %w", q.name, err)
	}
	depth, _ := dest[0].(int64)
	bytes, _ := dest[1].(int64)
	q.mu.Lock()
	cur := q.c
	q.mu.Unlock()
	d.depth = depth - cur.depth
	d.bytes = bytes - cur.bytes
	return nil
}

// applyMove moves a message to another queue (dead letter, expiry address)
// under a new rowid, so it joins the tail of its new queue; or, for an
// expiry with no address, deletes it. A message already gone is a no-op,
// which makes expiry from the sweep and from the head idempotent.
func (w *writer) applyMove(r *request, b *batch) error {
	if r.ref.body != 0 {
		return w.applyMoveCopy(r, b)
	}
	if r.to == nil {
		n, err := w.conn.exec(`DELETE FROM messages WHERE id = ?`, r.ref.rowid)
		if err != nil {
			return fmt.Errorf("expire %d in %q: %w", r.ref.rowid, r.q.name, err)
		}
		if n == 1 {
			w.moved(r, b, false, r.ref.size)
		}
		return nil
	}
	dest := make([]driver.Value, 2)
	err := w.conn.queryRow(`SELECT priority, data FROM messages WHERE id = ?`, []driver.Value{r.ref.rowid}, dest)
	if errors.Is(err, errNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("move %d from %q: %w", r.ref.rowid, r.q.name, err)
	}
	prio, _ := dest[0].(int64)
	data, _ := dest[1].([]byte)
	data = append([]byte(nil), data...) // the driver's buffer is reused
	if _, err := w.conn.exec(`DELETE FROM messages WHERE id = ?`, r.ref.rowid); err != nil {
		return fmt.Errorf("move %d from %q: %w", r.ref.rowid, r.q.name, err)
	}
	return w.moveInto(r, b, data, uint8(prio))
}

// applyMoveCopy is applyMove for a copy. A copy moved to a dead-letter
// queue or an expiry address becomes a row of messages there, with the
// reason: such moves are rare, and the body loses one copy.
func (w *writer) applyMoveCopy(r *request, b *batch) error {
	rn, i, ok, err := w.runOf(r.q.id, r.ref.prio, r.ref.rowid)
	if err != nil {
		return fmt.Errorf("move %d from %q: %w", r.ref.rowid, r.q.name, err)
	}
	if !ok {
		return nil
	}
	it := rn.items[i]
	var data []byte
	if r.to != nil {
		dest := make([]driver.Value, 1)
		if err := w.conn.queryRow(`SELECT data FROM bodies WHERE id = ?`, []driver.Value{it.body}, dest); err != nil {
			return fmt.Errorf("move %d from %q: body %d: %w", r.ref.rowid, r.q.name, it.body, err)
		}
		data, _ = dest[0].([]byte)
		data = append([]byte(nil), data...) // the driver's buffer is reused
	}
	rn.items = slices.Delete(rn.items, i, i+1)
	if err := w.save(rn); err != nil {
		return fmt.Errorf("move %d from %q: %w", r.ref.rowid, r.q.name, err)
	}
	w.unref(it.body)
	if r.to == nil {
		w.moved(r, b, false, it.size)
		return nil
	}
	return w.moveInto(r, b, data, r.ref.prio)
}

// applyUpdateCopy persists a copy's delivery count and backoff in its
// run.
func (w *writer) applyUpdateCopy(r *request) error {
	rn, i, ok, err := w.runOf(r.q.id, r.ref.prio, r.ref.rowid)
	if err != nil || !ok {
		return err
	}
	rn.items[i].deliv, rn.items[i].notBf = int64(r.deliv), r.notBf
	return w.save(rn)
}

// moveInto stores data, taken out of r.q, as a new row of r.to.
func (w *writer) moveInto(r *request, b *batch, data []byte, prio uint8) error {
	w.lastRow++
	id := w.lastRow
	if _, err := w.conn.exec(`INSERT INTO messages (id, queue, priority, expires_at, reason, data) VALUES (?, ?, ?, 0, ?, ?)`,
		id, r.to.id, int64(prio), r.name, data); err != nil {
		return fmt.Errorf("move %d to %q: %w", r.ref.rowid, r.to.name, err)
	}
	w.plainRow(r.to.id, prio, id)
	w.moved(r, b, true, int64(len(data)))
	b.appends = append(b.appends, appendEffect{q: r.to, prio: prio, e: entry{rowid: id, reason: r.name, data: data}})
	return nil
}

// moved counts a message of size bytes out of r.q, and into r.to with
// into.
func (w *writer) moved(r *request, b *batch, into bool, size int64) {
	src := b.delta(r.q)
	src.depth--
	src.bytes -= size
	if r.dlq {
		src.deadLettered++
	} else {
		src.expired++
	}
	if into {
		dst := b.delta(r.to)
		dst.depth++
		dst.bytes += size
		dst.enqueued++
	}
}

func (w *writer) applyCreate(r *request, b *batch) error {
	if q, ok := w.s.Lookup(r.name); ok && !q.gone.Load() && !b.dropped[q] {
		return nil
	}
	for _, q := range b.created {
		if q.name == r.name {
			return nil
		}
	}
	dest := make([]driver.Value, 1)
	err := w.conn.queryRow(`INSERT INTO queues (name, kind) VALUES (?, ?) RETURNING id`, []driver.Value{r.name, int64(r.qkind)}, dest)
	if err != nil {
		return fmt.Errorf("create queue %q: %w", r.name, err)
	}
	id := dest[0].(int64)
	q := newQueue(w.s, id, r.name, r.qkind)
	// A queue made now has no rows on disk (a dropped queue's rows went
	// with it), so its first polls need not look there: with many send
	// queues made at once, those empty refills were a tenth of the work.
	for i := range q.lv {
		q.lv[i].spilled = false
	}
	b.created = append(b.created, q)
	return nil
}

// applyPrune forgets a queue's dedupe records older than the window, and,
// past DedupeMaxEntries, the oldest until a tenth of the room is free, so
// that the (scanning) count prune runs rarely. Records go by whole runs,
// each as old as the commit that made it.
func (w *writer) applyPrune(r *request, b *batch) error {
	b.dedupeForget = true
	c := w.s.cfg
	cutoff := w.s.now().Add(-c.DedupeWindow).UnixNano()
	byAge, err := w.pruneDedupe(r.q, `at < ?`, cutoff)
	if err != nil {
		return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
	}
	r.q.mu.Lock()
	entries := r.q.c.dedupeEntries + b.delta(r.q).dedupeEntries - byAge
	r.q.mu.Unlock()
	var byCount int64
	if max := int64(c.DedupeMaxEntries); entries > max {
		// The newest runs that hold keep keys stay; the run that crosses
		// keep goes, and every run as old or older.
		keep := max - max/10
		var kept int64
		var at int64
		found := false
		_, _, err := w.conn.scan(`SELECT at, n FROM dedupe_runs WHERE queue = ? ORDER BY at DESC`, []driver.Value{r.q.id}, 2, func(row []driver.Value) bool {
			n, _ := row[1].(int64)
			if kept+n > keep {
				at, _ = row[0].(int64)
				found = true
				return false
			}
			kept += n
			return true
		})
		if err != nil {
			return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
		}
		if found {
			if byCount, err = w.pruneDedupe(r.q, `at <= ?`, at); err != nil {
				return fmt.Errorf("prune dedupe of %q: %w", r.q.name, err)
			}
		}
	}
	if n := byCount + byAge; n > 0 {
		b.delta(r.q).dedupeEntries -= n
	}
	return nil
}

// pruneDedupe deletes q's dedupe runs whose time matches cond (on at, with
// one argument) and returns how many keys they held.
func (w *writer) pruneDedupe(q *Queue, cond string, at int64) (int64, error) {
	dest := make([]driver.Value, 1)
	if err := w.conn.queryRow(`SELECT coalesce(sum(n), 0) FROM dedupe_runs WHERE queue = ? AND `+cond, []driver.Value{q.id, at}, dest); err != nil {
		return 0, err
	}
	keys, _ := dest[0].(int64)
	if keys == 0 {
		return 0, nil
	}
	if _, err := w.conn.exec(`DELETE FROM dedupe_runs WHERE queue = ? AND `+cond, q.id, at); err != nil {
		return 0, err
	}
	return keys, nil
}

// retryParked runs the parked puts again now that a commit may have freed
// space. Those still over the limit park again.
func (w *writer) retryParked() {
	parked := w.parked
	w.parked = nil
	for i, r := range parked {
		if w.fullAfter(0, 0, int64(len(r.puts)), putBytes(r)) {
			w.parked = append(w.parked, parked[i:]...)
			return
		}
		w.run([]*request{r})
	}
}

func putBytes(r *request) int64 {
	var n int64
	for _, p := range r.puts {
		n += int64(len(p.Data))
	}
	return n
}
