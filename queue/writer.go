package queue

import (
	"cmp"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
)

// writer owns the one write connection. It gathers the requests that are
// waiting into one transaction, commits it with one fsync (group commit),
// then publishes the effects in memory and completes the requests.
type writer struct {
	s    *Store
	conn *rawConn
	reqs chan *request

	mu     sync.RWMutex // guards closed against sends on a closed reqs
	closed bool

	parked []*request // puts waiting for space (FullBlock)

	// totals across every queue, published after each commit.
	msgs  atomic.Int64
	bytes atomic.Int64

	commits, requests, commitNanos atomic.Int64
	// wholeRuns counts the runs deleteWholeRun deleted unread.
	wholeRuns atomic.Int64
	// runReads counts the runs runFrom read from the table; rangeFrees
	// the ranged deletes of bodies (see freeRange).
	runReads, rangeFrees atomic.Int64

	// writer-owned
	// lastRow is the last message rowid assigned. The writer assigns
	// rowids itself because SQLite reuses the highest rowid once it is
	// deleted, and the queues' in-memory heads rely on rowids only growing.
	lastRow int64
	// pending holds rows to insert, flushed as multi-row INSERTs: one
	// statement for many rows costs far less than one statement each.
	pending []driver.Value
	// batchAt is the current batch's dedupe time, 0 until asked for;
	// lastAt the previous one's.
	batchAt, lastAt int64
	// pendingBodies and pendingCopies are shared bodies and the copies
	// that refer to them, flushed as multi-row INSERTs like pending.
	pendingBodies []driver.Value
	pendingCopies []copyRow
	copyArgs      []driver.Value // pendingCopies' runs as flushInserts writes them
	runItems      []runItem
	ackItems      []runItem // deleteWholeRun's scratch
	ackBlob       []byte    // deleteWholeRun's scratch
	counterRow    []byte    // writeCounters' scratch
	// logged is the sum of counter_log's rows, by queue, and logRows
	// their count (see counterlog.go).
	logged  map[*Queue]*counters
	logRows int
	// lastRuns holds, per queue and priority, the run the writer last
	// read or rewrote, as committed (see runFrom).
	lastRuns map[plainKey]run
	// dedupeLast caches each queue and origin's last dedupe id, as of the
	// last commit: the lookup of a stream's next ids then reads nothing.
	// At most dedupeLastMax entries; forgotten whole past that, at a
	// prune or drop, and when the writer idles.
	dedupeLast map[dedupeSource]int64
	copyGroups []copyGroup
	groupAt    map[plainKey]int // copyGroups' indexes
	appends    []appendEffect   // a committed batch's, for the next
	// plain holds the rows other than copies that the batch put, by
	// queue and priority: a run must not span one (see runs.go).
	plain map[plainKey][]int64
	// refs counts the copies of the bodies that have more than one (see
	// refsOf), the batch's changes included; refLog lists those changes,
	// undone if it rolls back.
	refs   *refCounts
	refLog []refChange
	// frees holds bodies whose last copy the batch deleted, those in
	// freedRanges apart (freedInRanges; see freeRange).
	frees         []int64
	freedRanges   []bodyRange
	freedInRanges []int64
	// acks holds rows to delete, flushed many per statement; ackSets the
	// acks requests gathered, each request's array as it came.
	acks    []ackRow
	ackSets [][]ackRow
	scratch []driver.Value
	// failLog holds back the lines of failed fire-and-forget requests.
	failLog ratelog.Limiter
}

const (
	insertCols    = 5
	insertMaxRows = 32
	insertPrefix  = `INSERT INTO messages (id, queue, priority, expires_at, data) VALUES `
	bodyCols      = 2
)

func newWriter(s *Store) (*writer, error) {
	conn, err := openRaw(dsn(s.cfg.Path, s.cfg.Sync, false))
	if err != nil {
		return nil, fmt.Errorf("open writer on %s: %w", s.cfg.Path, err)
	}
	w := &writer{s: s, conn: conn, reqs: make(chan *request, s.cfg.MaxBatch), groupAt: map[plainKey]int{}, failLog: ratelog.Limiter{Now: s.now}}
	if err := w.loadTotals(); err != nil {
		conn.close()
		return nil, err
	}
	return w, nil
}

func (w *writer) loadTotals() error {
	var n, b int64
	for _, q := range w.s.queues {
		n += q.c.depth
		b += q.c.bytes
	}
	w.msgs.Store(n)
	w.bytes.Store(b)
	dest := make([]driver.Value, 1)
	if err := w.conn.queryRow(`SELECT max(coalesce((SELECT max(id) FROM messages), 0), coalesce((SELECT max(id) FROM copies), 0),
		coalesce((SELECT max(id) FROM bodies), 0))`, nil, dest); err != nil {
		return fmt.Errorf("load last rowid: %w", err)
	}
	w.lastRow = dest[0].(int64)
	// Runs of single copies are not read: each of their bodies has one
	// copy, which refs leaves out.
	refs := map[int64]int32{}
	err := scanRuns(w.conn.scan, `SELECT queue, priority, id, items FROM copies WHERE body <> ?`, []driver.Value{singleRun}, func(r run) error {
		for _, it := range r.items {
			refs[it.body]++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count shared bodies' copies: %w", err)
	}
	maps.DeleteFunc(refs, func(_ int64, n int32) bool { return n == 1 })
	w.refs = newRefCounts(refs, w.lastRow+1)
	return nil
}

func (w *writer) closeConn() error { return w.conn.close() }

func (w *writer) totals() (int64, int64) { return w.msgs.Load(), w.bytes.Load() }

// submit hands r to the writer. It blocks while the writer's queue is full,
// which is the back-pressure on producers.
func (w *writer) submit(r *request) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	w.reqs <- r
	return nil
}

// close stops intake; loop drains what was submitted and returns.
func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.reqs)
	}
}

// loop is the writer goroutine.
func (w *writer) loop() {
	max := w.s.cfg.MaxBatch
	batch := make([]*request, 0, max)
	idle := time.NewTimer(idleTrim)
	defer idle.Stop()
	for {
		var r *request
		var ok bool
		select {
		case r, ok = <-w.reqs:
		case <-idle.C:
			w.trim()
			r, ok = <-w.reqs
		}
		if !ok {
			for _, p := range w.parked {
				p.op.finish(ErrClosed)
			}
			w.parked = nil
			return
		}
		batch = append(batch[:0], r)
	drain:
		for len(batch) < max {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		w.run(batch)
		clear(batch) // the requests, their messages and acks, are done
		if len(w.parked) > 0 {
			w.retryParked()
		}
		w.maybeRestartWAL()
		idle.Reset(idleTrim)
	}
}

// idleTrim is how long the writer waits without a request before it
// gives back the memory its busiest batches grew.
const idleTrim = 500 * time.Millisecond

// trim drops the arrays the writer reuses from one batch to the next, and
// each idle queue's in-memory buffers: they are sized by the largest
// burst, and a node with thousands of queues, idle after one, should not
// keep that much per queue.
func (w *writer) trim() {
	w.pending, w.pendingBodies, w.pendingCopies, w.copyArgs = nil, nil, nil, nil
	w.runItems, w.copyGroups, w.appends, w.refLog, w.frees = nil, nil, nil, nil, nil
	w.freedRanges, w.freedInRanges = nil, nil
	w.acks, w.ackSets, w.scratch, w.ackItems, w.ackBlob, w.counterRow = nil, nil, nil, nil, nil, nil
	w.dedupeLast, w.lastRuns = nil, nil
	w.groupAt, w.plain = map[plainKey]int{}, nil
	w.refs.trim()
	for _, q := range w.s.Queues() {
		q.trim()
	}
}

// run commits one batch. If the batch fails as a whole, each request is
// tried again alone, so one bad request cannot fail its neighbours.
func (w *writer) run(batch []*request) {
	b := newBatch()
	// The appends of a batch are as many as its puts, thousands when a
	// topic fans out: reuse the last batch's array rather than grow a new
	// one from nothing.
	b.appends = w.appends[:0]
	err := w.exec(batch, b)
	if err == nil {
		w.publish(b)
		clear(b.appends)
		w.appends = b.appends[:0]
		for _, r := range batch {
			giveBackAcks(r)
		}
		return
	}
	if len(batch) == 1 {
		w.fail(batch[0], err)
		return
	}
	if held, ok := w.failLog.Allow("batch"); ok {
		w.s.log.Warn("group commit failed; retrying requests one by one (logged once a minute)", slog.Int("requests", len(batch)), slog.Any(logkey.Error, err), slog.Int64("suppressed", held))
	}
	for _, r := range batch {
		b := newBatch()
		if err := w.exec([]*request{r}, b); err != nil {
			w.fail(r, err)
			continue
		}
		w.publish(b)
		giveBackAcks(r)
	}
}

// giveBackAcks gives the acks a committed request took back to their
// queue (see Queue.takeAcks).
func giveBackAcks(r *request) {
	if r.kind == reqAck && r.taken {
		r.q.giveBackAcks(r.acks)
		r.acks = nil
	}
}

func (w *writer) fail(r *request, err error) {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrFull {
		err = fmt.Errorf("%w: disk full: %v", ErrStoreFull, err)
	}
	if r.settle {
		// Its caller did not wait: the messages come back instead.
		r.q.unsettle(r)
	}
	if r.op == nil {
		// A fire-and-forget request (an ack, a nack): nobody to tell.
		// While the disk is full each of them fails, and a settle's
		// messages come back to be settled again: one line a minute.
		if held, ok := w.failLog.Allow("write"); ok {
			w.s.log.Error("store write failed (logged once a minute)", slog.Int("request", int(r.kind)), slog.Any(logkey.Error, err), slog.Int64("suppressed", held))
		}
		return
	}
	r.op.finish(err)
}

// exec runs batch in one transaction, recording its effects in b.
func (w *writer) exec(batch []*request, b *batch) error {
	if _, err := w.conn.exec(`BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	w.pending, w.acks, w.batchAt = w.pending[:0], w.acks[:0], 0
	clear(w.ackSets)
	w.ackSets = w.ackSets[:0]
	w.pendingBodies, w.pendingCopies, w.copyArgs, w.frees = w.pendingBodies[:0], w.pendingCopies[:0], w.copyArgs[:0], w.frees[:0]
	w.freedRanges, w.freedInRanges = w.freedRanges[:0], w.freedInRanges[:0]
	clear(w.plain)
	w.refLog = w.refLog[:0]
	err := w.admit(batch, b)
	if err == nil {
		err = w.apply(batch, b)
	}
	if err == nil {
		err = w.flushInserts(b)
	}
	if err == nil {
		err = w.flushAcks(b)
	}
	if err == nil {
		err = w.flushFrees(b)
	}
	if err == nil {
		err = w.writeCounters(b)
	}
	if err == nil {
		start := time.Now()
		if _, err = w.conn.exec(`COMMIT`); err != nil {
			err = fmt.Errorf("commit: %w", err)
		} else {
			took := time.Since(start)
			w.commitNanos.Add(int64(took))
			w.commits.Add(1)
			w.requests.Add(int64(len(batch)))
			if f := w.s.cfg.OnCommit; f != nil {
				f(len(batch), took)
			}
		}
	}
	if err != nil {
		w.rollback()
		w.undoRefs()
		// The runs it holds may be the batch's, which never were.
		w.lastRuns = nil
		b.unfreeze()
		return err
	}
	return nil
}

// rollback ends the failed transaction, unless SQLite ended it already:
// on some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY,
// SQLITE_INTERRUPT) it may roll the whole transaction back by itself, and
// a ROLLBACK then fails with "no transaction is active", which is no
// fault: every failed commit on a full disk logged it. The connection is
// back in autocommit mode exactly when no transaction is open.
func (w *writer) rollback() {
	if w.conn.c.AutoCommit() {
		return
	}
	if _, err := w.conn.exec(`ROLLBACK`); err != nil {
		w.s.log.Error("rollback failed", slog.Any(logkey.Error, err))
	}
}

// flushInserts writes the pending rows: messages, shared bodies and
// their copies. The copies go in key order, so that each insert lands
// beside the one before it rather than at the end of another queue's
// range: a publish puts one copy in each of its subscriptions.
func (w *writer) flushInserts(b *batch) error {
	if len(w.pendingCopies) > 0 {
		// The rows of messages waiting beside the copies are rows a run
		// must not span; only a batch with copies needs to know them.
		for i := 0; i+insertCols <= len(w.pending); i += insertCols {
			id, _ := w.pending[i].(int64)
			q, _ := w.pending[i+1].(int64)
			prio, _ := w.pending[i+2].(int64)
			w.plainRow(q, uint8(prio), id)
		}
		w.groupCopies()
		args := w.copyArgs[:0]
		items := w.runItems[:0]
		var plain []int64
		// end makes a run of items, which are the copies from
		// pendingCopies[i-len(items)] to pendingCopies[i-1], and tells
		// their appends which run they are in.
		single := true // every copy of the run is its body's only one
		end := func(i int, c copyRow) {
			args = runArgs(args, c.q, c.prio, items, single)
			single = true
			key := items[len(items)-1].id
			for _, r := range w.pendingCopies[i-len(items) : i] {
				e := &b.appends[r.ai].e
				e.run, e.runLen = key, len(items)
			}
			items = items[:0]
		}
		for i, c := range w.pendingCopies {
			if i == 0 || c.q != w.pendingCopies[i-1].q || c.prio != w.pendingCopies[i-1].prio {
				plain = slices.Sorted(slices.Values(w.plain[plainKey{c.q, c.prio}]))
			}
			// A run ends where its queue and priority change, and before
			// a row of another kind that the batch put between two of
			// its copies.
			for len(plain) > 0 && plain[0] < c.id {
				if len(items) > 0 && plain[0] > items[len(items)-1].id {
					end(i, c)
				}
				plain = plain[1:]
			}
			items = append(items, runItem{id: c.id, body: c.body, size: c.size, exp: c.exp})
			single = single && c.single
			if len(items) == maxRunLen || i+1 == len(w.pendingCopies) || w.pendingCopies[i+1].q != c.q || w.pendingCopies[i+1].prio != c.prio {
				end(i+1, c)
			}
		}
		w.copyArgs, w.runItems = args, items
		w.pendingCopies = w.pendingCopies[:0]
	}
	for _, t := range []struct {
		rows *[]driver.Value
		cols int
		sql  []string
		what string
	}{
		{&w.pending, insertCols, insertSQL, "messages"},
		{&w.pendingBodies, bodyCols, insertBodySQL, "shared bodies"},
		{&w.copyArgs, runCols, insertRunSQL, "runs of copies"},
	} {
		for len(*t.rows) > 0 {
			n := min(len(*t.rows)/t.cols, insertMaxRows)
			args := (*t.rows)[:n*t.cols]
			if _, err := w.conn.exec(t.sql[n], args...); err != nil {
				return fmt.Errorf("insert %d %s: %w", n, t.what, err)
			}
			*t.rows = (*t.rows)[n*t.cols:]
		}
	}
	return nil
}

// groupCopies orders pendingCopies by queue and priority, keeping their
// order within each, which is id order: the puts appended them so. This
// is one pass over the copies and a sort of the groups, not a sort of
// every copy.
func (w *writer) groupCopies() {
	// Groups keep their arrays from one commit to the next; those of
	// queues this commit does not touch are dropped at the end.
	groups := w.copyGroups
	clear(w.groupAt)
	for i := range groups {
		groups[i].rows = groups[i].rows[:0]
		w.groupAt[plainKey{groups[i].q, groups[i].prio}] = i
	}
	last := -1
	for _, c := range w.pendingCopies {
		if last < 0 || groups[last].q != c.q || groups[last].prio != c.prio {
			k := plainKey{c.q, c.prio}
			var ok bool
			if last, ok = w.groupAt[k]; !ok {
				groups = append(groups, copyGroup{q: c.q, prio: c.prio})
				last = len(groups) - 1
				w.groupAt[k] = last
			}
		}
		groups[last].rows = append(groups[last].rows, c)
	}
	groups = slices.DeleteFunc(groups, func(g copyGroup) bool { return len(g.rows) == 0 })
	slices.SortFunc(groups, func(x, y copyGroup) int { return cmp.Or(cmp.Compare(x.q, y.q), cmp.Compare(x.prio, y.prio)) })
	out := w.pendingCopies[:0]
	for i := range groups {
		out = append(out, groups[i].rows...)
	}
	w.pendingCopies, w.copyGroups = out, groups
}

// insertSQL[n] inserts n rows; insertBodySQL the same for bodies.
var (
	insertSQL     = multiRowSQL(insertPrefix, insertCols)
	insertBodySQL = multiRowSQL(`INSERT INTO bodies (id, data) VALUES `, bodyCols)
)

func multiRowSQL(prefix string, cols int) []string {
	out := make([]string, insertMaxRows+1)
	for n := 1; n <= insertMaxRows; n++ {
		out[n] = prefix + valuesSQL(n, cols)
	}
	return out
}

func (w *writer) apply(batch []*request, b *batch) error {
	for _, r := range batch {
		var err error
		switch r.kind {
		case reqPut:
			var parked bool
			if parked, err = w.applyPut(r, b); parked {
				continue
			}
		case reqAck:
			w.applyAck(r)
		case reqUpdate:
			if r.ref.body != 0 {
				err = w.applyUpdateCopy(r)
			} else {
				_, err = w.conn.exec(`UPDATE messages SET deliveries = ?, not_before = ? WHERE id = ?`, int64(r.deliv), r.notBf, r.ref.rowid)
			}
		case reqMove, reqExpire:
			err = w.applyMove(r, b)
		case reqMeta:
			err = w.setMeta(r.name, r.data)
		case reqCreateQueue:
			err = w.applyCreate(r, b)
		case reqPrune:
			err = w.applyPrune(r, b)
		case reqPurge:
			err = w.applyPurge(r, b)
		case reqMoveRows:
			err = w.applyMoveRows(r, b)
		case reqDrop:
			err = w.applyDrop(r, b)
		}
		if err != nil {
			return err
		}
		if r.settle {
			b.settles = append(b.settles, r)
		}
		if r.op != nil {
			b.done = append(b.done, r)
		}
	}
	return nil
}

// setMeta stores value under key, or deletes key for a nil value.
func (w *writer) setMeta(key string, value []byte) error {
	var err error
	if value == nil {
		_, err = w.conn.exec(`DELETE FROM meta WHERE key = ?`, key)
	} else {
		_, err = w.conn.exec(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	}
	return err
}

// publish makes a committed batch visible: new queues, new messages,
// counters, then completions.
func (w *writer) publish(b *batch) {
	w.learnDedupeLast(b)
	w.countersCommitted(b)
	for _, q := range b.created {
		w.s.register(q)
	}
	for _, sb := range b.stored {
		w.s.bodies.add(sb.sh)
	}
	w.s.bodies.drop(b.freed)
	w.parked = append(w.parked, b.parked...)
	for _, a := range b.appends {
		a.q.appended(a.prio, a.e)
	}
	// After the appends: those of rows the batch also removed are dropped.
	b.thawRemoved()
	for q := range b.dropped {
		w.s.dropped(q)
	}
	var dm, db int64
	for q, d := range b.deltas {
		q.addCounters(d)
		dm += d.depth
		db += d.bytes
	}
	w.msgs.Add(dm)
	w.bytes.Add(db)
	// Before the completions: a Sync that waited for these acks finds
	// their leases gone.
	for _, r := range b.settles {
		r.q.settled(r)
	}
	for _, r := range b.done {
		if r.kind == reqPut {
			r.op.deduped = b.deduped[r]
		}
		r.op.finish(b.rejected[r])
	}
}

// WriterStats are the group commit's figures since the store opened.
type WriterStats struct {
	Commits  int64 // transactions committed
	Requests int64 // requests they carried
	// CommitNanos is the total time spent in COMMIT (the fsync, in full mode).
	CommitNanos int64
}

// WriterStats returns the group commit's figures.
func (s *Store) WriterStats() WriterStats {
	return WriterStats{Commits: s.w.commits.Load(), Requests: s.w.requests.Load(), CommitNanos: s.w.commitNanos.Load()}
}

// copyGroup is the pending copies of one queue and priority.
type copyGroup struct {
	q    int64
	prio uint8
	rows []copyRow
}
