package queue

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order, each in its own transaction, and recorded
// in PRAGMA user_version. Never edit one that has shipped: append.
var migrations = []string{
	// 1: queues, messages, dedupe, meta.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;

-- Counters are persisted in the same transaction as the change they count,
-- so stats survive restarts exactly.
CREATE TABLE queues (
	id            INTEGER PRIMARY KEY,
	name          TEXT    NOT NULL UNIQUE,
	kind          INTEGER NOT NULL,
	depth         INTEGER NOT NULL DEFAULT 0,
	bytes         INTEGER NOT NULL DEFAULT 0,
	enqueued      INTEGER NOT NULL DEFAULT 0,
	acked         INTEGER NOT NULL DEFAULT 0,
	expired       INTEGER NOT NULL DEFAULT 0,
	deduped       INTEGER NOT NULL DEFAULT 0,
	dead_lettered INTEGER NOT NULL DEFAULT 0
);

-- One row per stored message. data is the encoded message as it was put;
-- expires_at (unix nanos, 0 = never) is computed from its remaining TTL at
-- put time, so TTL counts down across hops whatever the clocks say.
CREATE TABLE messages (
	id         INTEGER PRIMARY KEY,
	queue      INTEGER NOT NULL,
	priority   INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	deliveries INTEGER NOT NULL DEFAULT 0,
	not_before INTEGER NOT NULL DEFAULT 0,
	reason     TEXT    NOT NULL DEFAULT '',
	data       BLOB    NOT NULL
);
CREATE INDEX messages_order ON messages (queue, priority, id);
-- Partial: only messages with a TTL pay for the expiry index.
CREATE INDEX messages_expiry ON messages (expires_at) WHERE expires_at > 0;

-- Dedupe window: one row per accepted (queue, origin, id), with the time it
-- was accepted. One b-tree only: this insert is on the hot path of every
-- message that crosses a link, and ids grow per origin, so inserts land at
-- the end of each origin's range. Pruning, by age and by count, scans; it
-- runs rarely (see Store.Sweep).
CREATE TABLE dedupe (
	queue  INTEGER NOT NULL,
	origin BLOB    NOT NULL,
	msg_id INTEGER NOT NULL,
	at     INTEGER NOT NULL,
	PRIMARY KEY (queue, origin, msg_id)
) WITHOUT ROWID;
`,
	// 2: shared bodies for a topic's copies.
	`
-- A message put into several queues by one put request (a topic's
-- publish: one copy per subscription) is stored once, in bodies, and each
-- queue gets a small row in copies that refers to it. The writer counts
-- the references in memory (recounted at open) and deletes a body in the
-- transaction that deletes its last copy. Body ids and copy ids are drawn
-- from the same sequence as messages' ids, so that a queue's rows of both
-- tables interleave in the order they were put.
CREATE TABLE bodies (
	id   INTEGER PRIMARY KEY,
	data BLOB    NOT NULL
);

-- One row per copy, clustered by what a queue reads in order: a put
-- appends to the end of its queue's priority, a refill is one range scan,
-- and an ack deletes by the key. No reason column: a copy moved to a
-- dead-letter queue or an expiry address becomes a messages row there.
CREATE TABLE copies (
	queue      INTEGER NOT NULL,
	priority   INTEGER NOT NULL,
	id         INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	deliveries INTEGER NOT NULL DEFAULT 0,
	not_before INTEGER NOT NULL DEFAULT 0,
	body       INTEGER NOT NULL,
	PRIMARY KEY (queue, priority, id)
) WITHOUT ROWID;
CREATE INDEX copies_expiry ON copies (expires_at) WHERE expires_at > 0;
`,
	// 3: runs of copies.
	`
-- A row of copies becomes a run: the copies one commit put into one
-- queue and priority, encoded in items (see runs.go), keyed by the last
-- one's id, with their count and bytes beside. body is 0 in a run. The
-- rows schema 2 stored, one copy each, become runs of one when this
-- migration applies (convertSingleCopies).
ALTER TABLE copies ADD COLUMN items BLOB;
ALTER TABLE copies ADD COLUMN n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE copies ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
`,
	// 4: runs of dedupe keys.
	`
-- The dedupe window becomes runs: the ids one commit accepted into one
-- queue from one origin, encoded in ids (see dedupe.go), in one row keyed
-- by the largest, with the smallest, their count and the commit's time
-- beside. One insert per commit and origin replaces one per message, and
-- the lookup of a stream's next ids, all past its last run, is one index
-- probe. schema 1's rows become runs of one.
CREATE TABLE dedupe_runs (
	queue  INTEGER NOT NULL,
	origin BLOB    NOT NULL,
	max_id INTEGER NOT NULL,
	min_id INTEGER NOT NULL,
	at     INTEGER NOT NULL,
	n      INTEGER NOT NULL,
	ids    BLOB    NOT NULL,
	PRIMARY KEY (queue, origin, max_id)
) WITHOUT ROWID;
INSERT INTO dedupe_runs (queue, origin, max_id, min_id, at, n, ids)
	SELECT queue, origin, msg_id, msg_id, at, 1, X'' FROM dedupe;
DROP TABLE dedupe;
`,
	// 5: the count of a subscription's drops at its bound.
	`
-- What a queue dropped at its bound (Queue.SetMaxDepth, DeleteOverflowed)
-- is counted with the drop, as the other counters are.
ALTER TABLE queues ADD COLUMN overflowed INTEGER NOT NULL DEFAULT 0;
`,
	// 6: the counter log.
	`
-- A commit that touches several queues appends their counters' deltas
-- here, one row per commit, rather than update each queue's row; the
-- writer folds them into queues every few dozen rows (see counterlog.go).
CREATE TABLE counter_log (
	id     INTEGER PRIMARY KEY,
	deltas BLOB    NOT NULL
);
`,
}

// migrationData runs Go code after a migration's DDL, in its transaction,
// for changes SQL alone cannot make.
var migrationData = map[int]func(ctx context.Context, tx *sql.Tx) error{
	3: convertSingleCopies,
}

// convertSingleCopies turns each row of copies schema 2 stored into a run
// of one copy.
func convertSingleCopies(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT c.queue, c.priority, c.id, c.expires_at, c.deliveries, c.not_before, c.body, length(b.data)
		FROM copies c JOIN bodies b ON b.id = c.body WHERE c.items IS NULL`)
	if err != nil {
		return err
	}
	type single struct {
		q, prio int64
		it      runItem
	}
	var all []single
	for rows.Next() {
		var s single
		if err := rows.Scan(&s.q, &s.prio, &s.it.id, &s.it.exp, &s.it.deliv, &s.it.notBf, &s.it.body, &s.it.size); err != nil {
			rows.Close()
			return err
		}
		all = append(all, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range all {
		if _, err := tx.ExecContext(ctx, `UPDATE copies SET items = ?, n = 1, size = ?, body = 0, deliveries = 0, not_before = 0
			WHERE queue = ? AND priority = ? AND id = ?`, encodeRun(nil, []runItem{s.it}), s.it.size, s.q, s.prio, s.it.id); err != nil {
			return err
		}
	}
	// A copy whose body was gone could not be kept: schema 2's check
	// called that an inconsistency.
	_, err = tx.ExecContext(ctx, `DELETE FROM copies WHERE items IS NULL`)
	return err
}

// migrate brings the schema up to date.
func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this petrel (%d): upgrade petrel", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if err := applyMigration(ctx, db, i+1, migrations[i]); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, version int, ddl string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %d: %w", version, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("migration %d: %w", version, err)
	}
	if f := migrationData[version]; f != nil {
		if err := f(ctx, tx); err != nil {
			return fmt.Errorf("migration %d: %w", version, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version)); err != nil {
		return fmt.Errorf("migration %d: %w", version, err)
	}
	return tx.Commit()
}
