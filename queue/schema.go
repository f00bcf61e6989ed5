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
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version)); err != nil {
		return fmt.Errorf("migration %d: %w", version, err)
	}
	return tx.Commit()
}
