package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/petrelmq/petrel/message"
)

// dedupeKey is one (queue, origin, id) of the dedupe window.
type dedupeKey struct {
	q      int64
	origin message.NodeID
	id     uint64
}

// dedupeMaxRows is how many rows one dedupe INSERT carries.
const dedupeMaxRows = 32

// dedupeSQL[n] records n keys, ignoring those already there.
var dedupeSQL = func() []string {
	out := make([]string, dedupeMaxRows+1)
	for n := 1; n <= dedupeMaxRows; n++ {
		out[n] = `INSERT OR IGNORE INTO dedupe (queue, origin, msg_id, at) VALUES ` + valuesSQL(n, 4)
	}
	return out
}()

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

// recordKeys inserts keys into the dedupe window and returns those that
// were not there. A statement that inserted all its rows had only new
// keys, the common case; otherwise each key's time tells: the batch's time
// is unique to it (see batchTime), so a row with another time was there
// before.
func (w *writer) recordKeys(keys []dedupeKey) (map[dedupeKey]bool, error) {
	fresh := make(map[dedupeKey]bool, len(keys))
	now := w.batchTime()
	dest := make([]driver.Value, 1)
	for len(keys) > 0 {
		n := min(len(keys), dedupeMaxRows)
		chunk := keys[:n]
		keys = keys[n:]
		args := w.scratch[:0]
		for _, k := range chunk {
			args = append(args, k.q, k.origin[:], int64(k.id), now)
		}
		w.scratch = args
		added, err := w.conn.exec(dedupeSQL[n], args...)
		if err != nil {
			return nil, fmt.Errorf("record %d dedupe keys: %w", n, err)
		}
		if added == int64(n) {
			for _, k := range chunk {
				fresh[k] = true
			}
			continue
		}
		for _, k := range chunk {
			err := w.conn.queryRow(`SELECT at FROM dedupe WHERE queue = ? AND origin = ? AND msg_id = ?`,
				[]driver.Value{k.q, k.origin[:], int64(k.id)}, dest)
			if err != nil {
				return nil, fmt.Errorf("read dedupe key: %w", err)
			}
			if at, _ := dest[0].(int64); at == now {
				fresh[k] = true
			}
		}
	}
	return fresh, nil
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
	var one int
	err := q.s.rdb.QueryRowContext(ctx, `SELECT 1 FROM dedupe WHERE queue = ? AND origin = ? AND msg_id = ?`,
		q.id, origin[:], int64(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dedupe lookup in %q: %w", q.name, err)
	}
	return true, nil
}
