package queue

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The operator's side of a queue: Browse reads it without consuming,
// Purge empties it, Move takes messages out of it into other queues (as
// `petrel dlq replay` does with dead letters).
//
// Purge and Move remove rows, so a consumer must not lease one of them
// between the writer's apply and its commit: the writer freezes the queue
// for that time (no message is handed out, see nextLocked), and at the
// commit drops the removed rows from the in-memory head before it thaws
// the queue. Rows in flight when the queue froze, and rows whose ack or
// move is on its way to the writer, are left alone (see frozenQueue): their
// owners settle them as usual.

// Browsed is a stored message as Browse reads it.
type Browsed struct {
	RowID    int64
	Priority uint8
	// Attempt is the delivery attempt the message is in, if in flight, or
	// that its next delivery will be: 1 for a message never delivered.
	Attempt int
	// InFlight says a consumer holds the message under a lease now.
	InFlight bool
	// ExpiresAt is when the message expires, zero if never.
	ExpiresAt time.Time
	// NotBefore is the end of its redelivery backoff, zero if none.
	NotBefore time.Time
	// Reason says why the message was moved here (dead letter, expiry).
	Reason string
	// Data is the encoded message.
	Data []byte
	// bodyID is a copy's body while browseRows reads it.
	bodyID int64
}

// browseSQL reads one priority of a queue in delivery order, along the
// messages_order index. One ORDER BY priority DESC, id would sort every
// row of a large queue, data included, to return the first few.
// A run of copies comes as its items, with 1 in the last column; the
// copies' bodies are read one by one. Runs are contiguous (see runs.go):
// expanding each in place keeps id order, and each row is one copy or
// more, so the limit on rows is enough.
const browseSQL = `SELECT id, expires_at, deliveries, not_before, reason, data, 0 FROM messages
	WHERE queue = ?1 AND priority = ?2 AND id > ?3
	UNION ALL
	SELECT id, 0, 0, 0, '', items, 1 FROM copies
	WHERE queue = ?1 AND priority = ?2 AND id > ?3
	ORDER BY 1 LIMIT ?4`

// Browse returns up to limit of q's messages (all when limit <= 0), most
// urgent first, then oldest first. It reads the committed rows through
// the store's read connections: it takes no lease and changes nothing.
// Messages in flight are included, marked InFlight. Each priority is
// read on its own, so a browse that races puts and acks is not one
// snapshot of the queue. It holds every message it returns in memory:
// Each reads a queue of any size a page at a time.
func (q *Queue) Browse(ctx context.Context, limit int) ([]Browsed, error) {
	if q.s.ctx.Err() != nil {
		return nil, ErrClosed
	}
	var out []Browsed
	for p := levels - 1; p >= 0; p-- {
		rest := -1 // SQLite's "no limit"
		if limit > 0 {
			if rest = limit - len(out); rest == 0 {
				break
			}
		}
		var err error
		if out, _, _, err = q.browseRows(ctx, out, uint8(p), 0, page{rows: rest, msgs: rest}); err != nil {
			return nil, fmt.Errorf("browse %q: %w", q.name, err)
		}
	}
	q.markInFlight(out)
	return out, nil
}

// eachRows and eachBytes bound a page of Each: at most eachRows rows, and
// past its first row no more than eachBytes of messages.
const (
	eachRows  = 256
	eachBytes = 4 << 20
)

// Key is a message's place in a queue's delivery order: its priority
// (higher first), then its id (lower first). Ids are drawn from one
// sequence for every row of the store, messages and copies alike, and a
// message keeps its id while it stays in its queue (a release or a nack
// does not change it): a Key stays where it was as the queue changes
// around it. A run of copies is one row, but each copy has its own id,
// so a Key names one message, not its row.
type Key struct {
	Priority uint8
	ID       int64
}

// Start is the Key before every message: EachAfter(ctx, Start, fn) is
// Each(ctx, fn).
var Start = Key{Priority: levels - 1}

// Key returns b's place in the delivery order.
func (b Browsed) Key() Key { return Key{Priority: b.Priority, ID: b.RowID} }

// Each calls fn with each of q's messages, in Browse's order, until fn
// returns false. It reads a page at a time (eachRows rows, eachBytes of
// messages), and no query is open while fn runs: a scan of a queue of
// any size holds one page in memory, and fn may Move or settle the rows
// it was given. A message put or released after Each began may be seen
// or not; one moved or settled before its page is read is not.
func (q *Queue) Each(ctx context.Context, fn func(Browsed) bool) error {
	_, err := q.EachAfter(ctx, Start, fn)
	return err
}

// EachAfter is Each from the message after key in delivery order: those
// of key's priority with a higher id, then those of every lower priority.
// It seeks there along the messages_order index and the copies' primary
// key, so where it starts costs O(log n), not the messages before it:
// a caller that pages through a queue hands back the Key of the last
// message it was given. key need not name a message the queue still
// holds. A key whose priority is past the highest is Start. It returns
// how many messages it read from the store: the pages fn was called on,
// which a caller that pages counts as its cost.
func (q *Queue) EachAfter(ctx context.Context, key Key, fn func(Browsed) bool) (read int, err error) {
	if q.s.ctx.Err() != nil {
		return 0, ErrClosed
	}
	first := int(key.Priority)
	if first >= levels {
		key, first = Start, levels-1
	}
	var got []Browsed
	for p := first; p >= 0; p-- {
		after := int64(0)
		if p == first {
			after = key.ID
		}
		for {
			var more bool
			got, after, more, err = q.browseRows(ctx, got[:0], uint8(p), after, page{rows: eachRows, msgs: -1, bytes: eachBytes})
			if err != nil {
				return read, fmt.Errorf("browse %q: %w", q.name, err)
			}
			read += len(got)
			q.markInFlight(got)
			for _, b := range got {
				if !fn(b) {
					return read, nil
				}
			}
			clear(got) // let the page's bytes go before the next is read
			if !more {
				break
			}
		}
	}
	return read, nil
}

// KeyAt returns the Key that EachAfter starts after to give q's messages
// from the nth (0: the first) in delivery order, and false if q holds n
// messages or fewer. It counts, and reads no message: whole priorities
// by their count along the index (a run of copies by its count of
// copies), and within the priority where the nth is, the ids before it,
// in SQLite when one table holds that priority, as most queues do. It
// costs O(n) still, but that of stepping over index entries, not of
// reading and decoding messages: an offset of 1,000,000 took 29 s as
// Each's skips.
func (q *Queue) KeyAt(ctx context.Context, n int) (Key, bool, error) {
	if q.s.ctx.Err() != nil {
		return Key{}, false, ErrClosed
	}
	key, ok, err := q.keyAt(ctx, int64(n))
	if err != nil {
		return Key{}, false, fmt.Errorf("offset %d of %q: %w", n, q.name, err)
	}
	return key, ok, nil
}

func (q *Queue) keyAt(ctx context.Context, rest int64) (Key, bool, error) {
	for p := int64(levels - 1); p >= 0; p-- {
		var msgs, copies int64
		err := q.s.rdb.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM messages WHERE queue = ?1 AND priority = ?2),
			(SELECT coalesce(sum(n), 0) FROM copies WHERE queue = ?1 AND priority = ?2)`, q.id, p).Scan(&msgs, &copies)
		if err != nil {
			return Key{}, false, err
		}
		if rest >= msgs+copies {
			rest -= msgs + copies
			continue
		}
		if copies == 0 {
			var id int64
			err := q.s.rdb.QueryRowContext(ctx, `SELECT id FROM messages WHERE queue = ? AND priority = ?
				ORDER BY id LIMIT 1 OFFSET ?`, q.id, p, rest).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return Key{}, false, nil // taken since counted
			}
			if err != nil {
				return Key{}, false, err
			}
			return Key{Priority: uint8(p), ID: id - 1}, true, nil
		}
		// Runs of copies, with messages perhaps: step over the rows
		// before the nth by their counts, without their data.
		rows, err := q.s.rdb.QueryContext(ctx, `SELECT id, 1, 0 FROM messages WHERE queue = ?1 AND priority = ?2
			UNION ALL SELECT id, n, 1 FROM copies WHERE queue = ?1 AND priority = ?2 ORDER BY 1`, q.id, p)
		if err != nil {
			return Key{}, false, err
		}
		var id, count, isRun int64
		found := false
		for rows.Next() {
			if err := rows.Scan(&id, &count, &isRun); err != nil {
				rows.Close()
				return Key{}, false, err
			}
			if rest < count {
				found = true
				break
			}
			rest -= count
		}
		rows.Close()
		if err := rows.Err(); err != nil || !found {
			return Key{}, false, err
		}
		if isRun == 0 {
			return Key{Priority: uint8(p), ID: id - 1}, true, nil
		}
		var b []byte
		err = q.s.rdb.QueryRowContext(ctx, `SELECT items FROM copies WHERE queue = ? AND priority = ? AND id = ?`, q.id, p, id).Scan(&b)
		if errors.Is(err, sql.ErrNoRows) {
			return Key{}, false, nil // changed since counted
		}
		if err != nil {
			return Key{}, false, err
		}
		items, err := decodeRun(nil, b)
		if err != nil {
			return Key{}, false, fmt.Errorf("run %d: %w", id, err)
		}
		if rest >= int64(len(items)) {
			rest = int64(len(items)) - 1 // the run lost copies since counted
		}
		return Key{Priority: uint8(p), ID: items[rest].id - 1}, true, nil
	}
	return Key{}, false, nil
}

// Oldest returns the encoded message of q stored first (the lowest row
// id over every priority), false if q is empty. Like Browse, it reads
// committed rows and changes nothing.
func (q *Queue) Oldest(ctx context.Context) ([]byte, bool, error) {
	// The head of each priority without bodies, then the winner's alone:
	// the console asks this of the queues it shows whose figures changed.
	rows, err := q.oldest(ctx, 1, true)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	// Its row is the first above the id before it: a run holds its copies
	// contiguously, and the oldest is its run's first.
	rows, _, _, err = q.browseRows(ctx, nil, rows[0].Priority, rows[0].RowID-1, page{rows: 1, msgs: 1})
	if err != nil {
		return nil, false, fmt.Errorf("oldest of %q: %w", q.name, err)
	}
	if len(rows) == 0 {
		return nil, false, nil // settled since
	}
	return rows[0].Data, true, nil
}

// OldestRows returns up to n of q's messages stored first, in id order,
// in flight or not, without their Data: their RowID and Priority, for a
// Move. It reads at most n messages of each priority, not the queue, and
// no bodies.
func (q *Queue) OldestRows(ctx context.Context, n int) ([]Browsed, error) {
	return q.oldest(ctx, n, true)
}

// OldestFree is OldestRows without the rows a consumer holds in flight:
// the n oldest that Delete would take.
func (q *Queue) OldestFree(ctx context.Context, n int) ([]Browsed, error) {
	return q.oldestFree(ctx, n, true)
}

// OldestFreeData is OldestFree with each row's data: a caller that picks
// among them by content.
func (q *Queue) OldestFreeData(ctx context.Context, n int) ([]Browsed, error) {
	return q.oldestFree(ctx, n, false)
}

func (q *Queue) oldestFree(ctx context.Context, n int, noData bool) ([]Browsed, error) {
	q.mu.Lock()
	held := len(q.inflight)
	q.mu.Unlock()
	rows, err := q.oldest(ctx, n+held, noData)
	if err != nil {
		return nil, err
	}
	q.markInFlight(rows)
	rows = slices.DeleteFunc(rows, func(r Browsed) bool { return r.InFlight })
	return rows[:min(n, len(rows))], nil
}

// oldest returns up to n of q's messages stored first (the lowest ids,
// whatever their priority), in id order: the first n of each priority,
// merged.
func (q *Queue) oldest(ctx context.Context, n int, noData bool) ([]Browsed, error) {
	if q.s.ctx.Err() != nil {
		return nil, ErrClosed
	}
	var rows []Browsed
	for p := levels - 1; p >= 0; p-- {
		var err error
		if rows, _, _, err = q.browseRows(ctx, rows, uint8(p), 0, page{rows: n, msgs: n, noData: noData}); err != nil {
			return nil, fmt.Errorf("oldest of %q: %w", q.name, err)
		}
	}
	slices.SortFunc(rows, func(a, b Browsed) int { return cmp.Compare(a.RowID, b.RowID) })
	return rows[:min(n, len(rows))], nil
}

// markInFlight marks the rows a consumer holds under a lease now.
func (q *Queue) markInFlight(out []Browsed) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range out {
		// A row being settled is no consumer's any more; the freeze
		// leaves it alone all the same (see frozenQueue).
		if l := q.inflight[out[i].RowID]; l != nil && !l.settling {
			out[i].InFlight, out[i].Attempt = true, l.attempt
		}
	}
}

// page bounds what browseRows reads: at most rows rows (-1 for no
// limit), of which at most msgs messages are returned (-1 for all: a row
// may be a run of many copies), and, with bytes > 0, no more rows once
// those read hold bytes of messages. noData leaves Data nil, and the
// bodies of copies unread.
type page struct {
	rows, msgs, bytes int
	noData            bool
}

// browseRows appends to out the messages of priority p whose row id is
// above after, within pg. It returns the id of the last row read, the
// next page's after, and whether rows may remain. A copy's body is read
// after its run: a copy settled meanwhile, whose body went with it, is
// left out, as if the browse had come a moment later.
//
// Paging by row id misses no row: runs are contiguous (see runs.go), so
// a row not read yet has all its copies above the last row read, and a
// run that loses copies keeps its key or takes that of a copy it still
// holds.
func (q *Queue) browseRows(ctx context.Context, out []Browsed, p uint8, after int64, pg page) ([]Browsed, int64, bool, error) {
	rows, err := q.s.rdb.QueryContext(ctx, browseSQL, q.id, int64(p), after, pg.rows)
	if err != nil {
		return out, after, false, err
	}
	var items []runItem
	start := len(out)
	n, bytes, last, stopped := 0, 0, after, false
	for rows.Next() {
		if pg.bytes > 0 && n > 0 && bytes >= pg.bytes || pg.msgs >= 0 && len(out)-start >= pg.msgs {
			stopped = true
			break
		}
		b := Browsed{Priority: p}
		var exp, notBefore, deliveries, isRun int64
		if err := rows.Scan(&b.RowID, &exp, &deliveries, &notBefore, &b.Reason, &b.Data, &isRun); err != nil {
			rows.Close()
			return out, last, false, err
		}
		n++
		last = b.RowID
		if isRun == 1 {
			if items, err = decodeRun(items[:0], b.Data); err != nil {
				rows.Close()
				return out, last, false, fmt.Errorf("run %d: %w", b.RowID, err)
			}
			for _, it := range items {
				if it.id <= after {
					// Seeking into a run (EachAfter): its row's key is
					// its last copy's, and those before the Key were
					// seen already.
					continue
				}
				rb := browsedOf(p, it.id, it.exp, it.deliv, it.notBf)
				rb.bodyID = it.body // its Data is read below
				out = append(out, rb)
				bytes += int(it.size)
			}
			continue
		}
		rb := browsedOf(p, b.RowID, exp, deliveries, notBefore)
		rb.Reason, rb.Data = b.Reason, b.Data
		out = append(out, rb)
		bytes += len(b.Data)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, last, false, err
	}
	more := stopped || (pg.rows >= 0 && n == pg.rows)
	if pg.msgs >= 0 && len(out)-start > pg.msgs {
		out = out[:start+pg.msgs]
	}
	kept := out[:start]
	for _, b := range out[start:] {
		if pg.noData {
			b.Data, b.bodyID = nil, 0
		}
		if id := b.bodyID; id != 0 {
			b.bodyID = 0
			var ok bool
			var sh *bodyData
			if sh, ok = q.s.bodies.get(id); ok {
				b.Data = slices.Clone(sh.data) // the cache's bytes are shared
			} else {
				err := q.s.rdb.QueryRowContext(ctx, `SELECT data FROM bodies WHERE id = ?`, id).Scan(&b.Data)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return out, last, false, fmt.Errorf("body %d of copy %d: %w", id, b.RowID, err)
				}
			}
		}
		kept = append(kept, b)
	}
	return kept, last, more, nil
}

func browsedOf(p uint8, id, exp, deliveries, notBefore int64) Browsed {
	return Browsed{Priority: p, RowID: id, Attempt: int(deliveries) + 1, ExpiresAt: browsedTime(exp), NotBefore: browsedTime(notBefore)}
}

// browsedTime is a stored time of unix nanos, zero when 0.
func browsedTime(nanos int64) time.Time {
	if nanos > 0 {
		return time.Unix(0, nanos)
	}
	return time.Time{}
}

// Purge deletes every message of q that is not in flight, in one
// transaction, and returns how many it deleted. Puts submitted before it
// are purged, later ones are not; messages in flight, or acked and not
// yet deleted, stay for their consumers to settle. Depth and bytes go
// down; no other counter moves, since the messages were neither acked nor
// expired.
func (q *Queue) Purge(ctx context.Context) (int, error) {
	r := &request{kind: reqPurge, q: q, op: newOp()}
	if err := q.s.w.submit(r); err != nil {
		return 0, fmt.Errorf("purge %q: %w", q.name, err)
	}
	if err := r.op.Wait(ctx); err != nil {
		return 0, fmt.Errorf("purge %q: %w", q.name, err)
	}
	return r.n, nil
}

// Move is one message to take out of a queue.
type Move struct {
	RowID int64  // as Browse returns it
	To    *Queue // another queue of the same store
	// Priority is the row's, as Browse returns it: the move looks for the
	// row there first. A wrong one costs a look at each other priority.
	Priority uint8
}

// Move moves messages of q to other queues in one transaction, so that a
// crash leaves each in one queue or the other, never both or neither. A
// moved message joins the tail of its new queue, as a put would, with its
// delivery count, backoff and reason cleared. Rows in flight (or being
// settled), gone already or not of q are skipped; Move returns how many
// it moved.
func (q *Queue) Move(ctx context.Context, moves []Move) (int, error) {
	for _, m := range moves {
		if m.To == nil || m.To.s != q.s || m.To == q {
			return 0, fmt.Errorf("move message %d of %q: the target must be another queue of the store", m.RowID, q.name)
		}
	}
	return q.moveRows(ctx, moves, "move")
}

// moveRows moves rows of q, or deletes those whose To is nil, in one
// request, and returns how many it took out of q.
func (q *Queue) moveRows(ctx context.Context, moves []Move, what string) (int, error) {
	return q.submitMoveRows(ctx, &request{kind: reqMoveRows, q: q, moves: moves, op: newOp()}, what)
}

// submitMoveRows submits r, a reqMoveRows of q, waits for its commit and
// returns how many rows it took out of q; what names it in errors.
func (q *Queue) submitMoveRows(ctx context.Context, r *request, what string) (int, error) {
	if err := q.s.w.submit(r); err != nil {
		return 0, fmt.Errorf("%s messages of %q: %w", what, q.name, err)
	}
	if err := r.op.Wait(ctx); err != nil {
		return 0, fmt.Errorf("%s messages of %q: %w", what, q.name, err)
	}
	return r.n, nil
}

// Delete deletes rows of q (their RowID and Priority, as Browse returns
// them) in one transaction, and returns how many it deleted. Rows in
// flight (or being settled), gone already or not of q are skipped. Depth
// and bytes go down; no other counter moves, as with Purge.
func (q *Queue) Delete(ctx context.Context, rows []Browsed) (int, error) {
	return q.moveRows(ctx, deletes(rows), "delete")
}

// DeleteOverflowed deletes rows of q as Delete does, and counts those it
// deleted into Stats.Overflowed in the same transaction: what the owner
// of a bounded queue drops at its bound (a subscription that drops its
// oldest).
func (q *Queue) DeleteOverflowed(ctx context.Context, rows []Browsed) (int, error) {
	r := &request{kind: reqMoveRows, q: q, moves: deletes(rows), overflow: true, op: newOp()}
	return q.submitMoveRows(ctx, r, "drop")
}

// deletes are the moves that delete rows.
func deletes(rows []Browsed) []Move {
	moves := make([]Move, len(rows))
	for i, r := range rows {
		moves[i] = Move{RowID: r.RowID, Priority: r.Priority} // no To: deleted
	}
	return moves
}

// applyPurge deletes r.q's rows that the freeze leaves free.
func (w *writer) applyPurge(r *request, b *batch) error {
	// Puts submitted before the purge are written first, so that it
	// purges them too: their rowids are below bound.
	if err := w.flushInserts(b); err != nil {
		return err
	}
	f := b.freeze(r.q)
	bound := w.lastRow
	var ids []int64
	var size int64
	_, _, err := w.conn.scan(`SELECT id, priority, length(data) FROM messages WHERE queue = ?1`,
		[]driver.Value{r.q.id}, 3, func(row []driver.Value) bool {
			id, _ := row[0].(int64)
			prio, _ := row[1].(int64)
			if f.free(id, uint8(prio)) {
				n, _ := row[2].(int64)
				size += n
				ids = append(ids, id)
			}
			return true
		})
	if err != nil {
		return fmt.Errorf("purge %q: %w", r.q.name, err)
	}
	for rest := ids; len(rest) > 0; {
		n := min(len(rest), deleteMaxRows)
		args := w.scratch[:0]
		for _, id := range rest[:n] {
			args = append(args, id)
		}
		w.scratch = args
		if _, err := w.conn.exec(deleteSQL[n], args...); err != nil {
			return fmt.Errorf("purge %q: %w", r.q.name, err)
		}
		rest = rest[n:]
	}
	// The queue's runs, read first and rewritten after: each loses the
	// copies the freeze leaves free.
	var runs []run
	err = scanRuns(w.conn.scan, `SELECT queue, priority, id, items FROM copies WHERE queue = ?`, []driver.Value{r.q.id}, func(rn run) error {
		rn.items = slices.Clone(rn.items)
		runs = append(runs, rn)
		return nil
	})
	if err != nil {
		return fmt.Errorf("purge %q: %w", r.q.name, err)
	}
	var copies int
	for _, rn := range runs {
		kept := rn.items[:0]
		for _, it := range rn.items {
			if !f.free(it.id, rn.prio) {
				kept = append(kept, it)
				continue
			}
			copies++
			size += it.size
			w.unref(it.body)
		}
		if len(kept) < len(rn.items) {
			rn.items = kept
			if err := w.save(rn); err != nil {
				return fmt.Errorf("purge %q: %w", r.q.name, err)
			}
		}
	}
	d := b.delta(r.q)
	d.depth -= int64(len(ids) + copies)
	d.bytes -= size
	r.n = len(ids) + copies
	f.gone = func(rowid int64, prio uint8) bool { return rowid <= bound && f.free(rowid, prio) }
	return nil
}

// applyMoveRows moves r's rows. Each keeps its row, under a new rowid
// (the in-memory heads rely on rowids only growing within a queue), so
// the message's bytes are not copied on disk.
func (w *writer) applyMoveRows(r *request, b *batch) error {
	f := b.freeze(r.q)
	moved := make(map[int64]struct{}, len(r.moves))
	row := make([]driver.Value, 4)
	for _, m := range r.moves {
		err := w.conn.queryRow(`SELECT queue, priority, expires_at, data FROM messages WHERE id = ?`, []driver.Value{m.RowID}, row)
		if errors.Is(err, errNoRows) {
			// Perhaps a copy, in a run of one of the queue's priorities.
			it, prio, ok, err := w.takeCopy(r.q, f, m)
			if err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			moved[m.RowID] = struct{}{}
			if m.To == nil {
				w.unref(it.body)
				moveCounts(b, r.q, nil, it.size)
				continue
			}
			e, err := w.putCopy(r.q, m.To, prio, it)
			if err != nil {
				return err
			}
			b.appends = append(b.appends, appendEffect{q: m.To, prio: prio, e: e})
			moveCounts(b, r.q, m.To, it.size)
			continue
		}
		if err != nil {
			return fmt.Errorf("move %d from %q: %w", m.RowID, r.q.name, err)
		}
		qid, _ := row[0].(int64)
		prio, _ := row[1].(int64)
		if qid != r.q.id || !f.free(m.RowID, uint8(prio)) {
			continue
		}
		exp, _ := row[2].(int64)
		data, _ := row[3].([]byte)
		if m.To == nil {
			if _, err := w.conn.exec(`DELETE FROM messages WHERE id = ?`, m.RowID); err != nil {
				return fmt.Errorf("delete %d from %q: %w", m.RowID, r.q.name, err)
			}
			moved[m.RowID] = struct{}{}
			moveCounts(b, r.q, nil, int64(len(data)))
			continue
		}
		data = append([]byte(nil), data...) // the driver's buffer is reused
		w.lastRow++
		id := w.lastRow
		e := entry{rowid: id, expiresAt: exp, data: data}
		if _, err := w.conn.exec(`UPDATE messages SET id = ?, queue = ?, deliveries = 0, not_before = 0, reason = '' WHERE id = ?`,
			id, m.To.id, m.RowID); err != nil {
			return fmt.Errorf("move %d from %q to %q: %w", m.RowID, r.q.name, m.To.name, err)
		}
		w.plainRow(m.To.id, uint8(prio), id)
		moved[m.RowID] = struct{}{}
		moveCounts(b, r.q, m.To, int64(len(data)))
		b.appends = append(b.appends, appendEffect{q: m.To, prio: uint8(prio), e: e})
	}
	r.n = len(moved)
	if r.overflow {
		b.delta(r.q).overflowed += int64(r.n)
	}
	f.gone = func(rowid int64, _ uint8) bool {
		_, ok := moved[rowid]
		return ok
	}
	return nil
}

// moveCounts counts a message of size bytes moved from src to dst, or
// deleted from src when dst is nil.
func moveCounts(b *batch, src, dst *Queue, size int64) {
	s := b.delta(src)
	s.depth--
	s.bytes -= size
	if dst == nil {
		return
	}
	d := b.delta(dst)
	d.depth++
	d.bytes += size
	d.enqueued++
}

// takeCopy takes copy m.RowID of q, if the freeze leaves it free, out of
// its run, and returns it with its priority: the copy still holds its
// body, for putCopy to move or for its caller to unref.
func (w *writer) takeCopy(q *Queue, f *frozenQueue, m Move) (runItem, uint8, bool, error) {
	for p := levels; p >= 0; p-- {
		// m.Priority first (as levels), then the others from the top.
		prio := uint8(p)
		switch {
		case p == levels:
			prio = m.Priority
		case prio == m.Priority:
			continue
		}
		rn, i, ok, err := w.runOf(q.id, prio, m.RowID)
		if err != nil {
			return runItem{}, 0, false, fmt.Errorf("take %d from %q: %w", m.RowID, q.name, err)
		}
		if !ok {
			continue
		}
		if !f.free(m.RowID, prio) {
			return runItem{}, 0, false, nil
		}
		it := rn.items[i]
		rn.items = slices.Delete(rn.items, i, i+1)
		if err := w.save(rn); err != nil {
			return runItem{}, 0, false, fmt.Errorf("take %d from %q: %w", m.RowID, q.name, err)
		}
		return it, prio, true, nil
	}
	return runItem{}, 0, false, nil
}

// putCopy puts copy it, taken from q, into a run of one in to under a new
// rowid, with its body, and returns it as to holds it.
func (w *writer) putCopy(q, to *Queue, prio uint8, it runItem) (entry, error) {
	from := it.id
	w.lastRow++
	it.id, it.deliv, it.notBf = w.lastRow, 0, 0
	if _, err := w.conn.exec(insertRunSQL[1], runArgs(nil, to.id, prio, []runItem{it}, false)...); err != nil {
		return entry{}, fmt.Errorf("move %d from %q to %q: %w", from, q.name, to.name, err)
	}
	w.plainRow(to.id, prio, it.id)
	dest := make([]driver.Value, 1)
	if err := w.conn.queryRow(`SELECT data FROM bodies WHERE id = ?`, []driver.Value{it.body}, dest); err != nil {
		return entry{}, fmt.Errorf("move %d from %q: body %d: %w", from, q.name, it.body, err)
	}
	data, _ := dest[0].([]byte)
	e := entry{rowid: it.id, expiresAt: it.exp, body: it.body, data: append([]byte(nil), data...), run: it.id, runLen: 1}
	e.sh = &bodyData{id: e.body, data: e.data}
	return e, nil
}

// frozenQueue is a queue frozen by a batch: what it held when it froze, and
// which rows the batch removed (nil until the batch's work on it is done).
//
// A batch may remove the rows the queue held in memory and those past
// what it loaded (on disk only). Any other row is in flight or being
// settled (an ack, a move to the dead-letter queue, an expiry on its way
// to the writer), and its owner finishes with it.
type frozenQueue struct {
	q        *Queue
	inMemory map[int64]struct{}
	loaded   [levels]int64
	gone     func(rowid int64, prio uint8) bool
}

// free reports whether the batch may remove the row.
func (f *frozenQueue) free(rowid int64, prio uint8) bool {
	if prio >= levels {
		return false
	}
	_, ok := f.inMemory[rowid]
	return ok || rowid > f.loaded[prio]
}

// freeze stops q handing out messages until b commits or rolls back.
func (b *batch) freeze(q *Queue) *frozenQueue {
	f := &frozenQueue{q: q, inMemory: map[int64]struct{}{}}
	q.mu.Lock()
	q.frozen++
	for p := range q.lv {
		l := &q.lv[p]
		f.loaded[p] = l.lastLoaded
		for _, e := range l.ready[l.head:] {
			f.inMemory[e.rowid] = struct{}{}
		}
		for _, e := range l.retry {
			f.inMemory[e.rowid] = struct{}{}
		}
	}
	for _, d := range q.delayed {
		f.inMemory[d.e.rowid] = struct{}{}
	}
	q.mu.Unlock()
	b.thaws = append(b.thaws, f)
	return f
}

// thawRemoved runs at the commit: it drops the removed rows from the
// frozen queues' memory and thaws them.
func (b *batch) thawRemoved() {
	for _, f := range b.thaws {
		f.q.thaw(f.gone)
	}
	b.thaws = nil
}

// unfreeze runs at a rollback: every row is still there, in memory too.
func (b *batch) unfreeze() {
	for _, f := range b.thaws {
		f.q.thaw(nil)
	}
	b.thaws = nil
}

func (q *Queue) thaw(gone func(rowid int64, prio uint8) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if gone != nil {
		q.dropLocked(gone)
	}
	q.frozen--
	q.wakeLocked()
}

// dropLocked removes the entries gone names from the in-memory head: the
// ready windows, the retry heaps and the backoff heap.
func (q *Queue) dropLocked(gone func(rowid int64, prio uint8) bool) {
	for p := range q.lv {
		l := &q.lv[p]
		prio := uint8(p)
		n := 0
		for _, e := range l.ready[l.head:] {
			if gone(e.rowid, prio) {
				q.releaseLocked(e)
				continue
			}
			l.ready[n] = e
			n++
		}
		clear(l.ready[n:])
		l.ready, l.head = l.ready[:n], 0
		n = 0
		for _, e := range l.retry {
			if !gone(e.rowid, prio) {
				l.retry[n] = e
				n++
			}
		}
		clear(l.retry[n:])
		l.retry = l.retry[:n]
		heap.Init(&l.retry)
	}
	n := 0
	for _, d := range q.delayed {
		if !gone(d.e.rowid, d.prio) {
			q.delayed[n] = d
			n++
		}
	}
	clear(q.delayed[n:])
	q.delayed = q.delayed[:n]
	heap.Init(&q.delayed)
}
