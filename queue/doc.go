// Package queue is Petrel's durable store: receive queues, send queues,
// priority, TTL, dedupe, leases and dead letters, in one SQLite database per
// node.
//
// # Model
//
// Every put stores its message's bytes once, as a row of the bodies table,
// and gives each queue it goes to a copy: an item in a run, one row of the
// copies table that holds the copies one commit put into one queue and
// priority (see runs.go). A move (a dead letter, an expiry address) makes a
// row of the messages table, with its reason. Every row and copy has an id
// from one sequence that grows with every commit. Within a queue the order
// is highest priority first and, within a priority, id order, which is
// commit order: FIFO.
//
// All writes go through one writer goroutine that gathers concurrent
// operations into one transaction and one fsync (group commit). Readers use
// their own connections; WAL mode lets them read while the writer writes.
//
// Each queue keeps a bounded window of its head in memory, per priority, so
// that in the common case a message goes from the commit to a consumer with
// no read of the disk. A priority whose backlog outgrew the window is marked
// spilled and refilled from the database as its window drains. A backlog of
// millions therefore costs disk, not memory.
//
// # Invariants
//
//   - A put is visible to consumers only after its transaction committed.
//   - A message row or copy is deleted only by an ack, an expiry, a move to
//     another queue (dead letter, expiry address, replay), a purge or the
//     drop of its queue (Store.Drop), each in a committed transaction; a
//     body with it, once its last copy is. Purges and replays leave rows
//     in flight alone.
//   - Leases live in memory. A crash forgets them, so every message that was
//     in flight is delivered again after a restart (at-least-once). The
//     delivery count is persisted on nack and lease expiry, not on delivery.
//   - Acks are group-committed asynchronously: an ack lost in a crash makes
//     the message come back, never disappear. A settle (an ack, a move to
//     the dead-letter queue) keeps its lease until it commits; one whose
//     commit fails (a full disk) gives the lease back with its deadline
//     passed, and the next sweep brings the message back as for a lease
//     timeout (see Queue.unsettle).
//   - Dedupe records (queue, origin, id) in the same transaction as the put,
//     so a resend that races its original is still caught.
//
// queue is the only package that imports go-sqlite3. It imports message and
// the standard library besides; it must not import conf, session or anything
// above it.
package queue
