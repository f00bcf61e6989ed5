package queue

import (
	"log/slog"
	"time"
)

// SyncMode says when a commit reaches stable storage.
type SyncMode int

const (
	// SyncFull fsyncs the write-ahead log at every commit: nothing that was
	// acknowledged is lost on power loss. The default.
	SyncFull SyncMode = iota
	// SyncNormal fsyncs only at checkpoints: the last commits may be lost on
	// power loss, never on a process crash.
	SyncNormal
)

// String returns "full" or "normal".
func (m SyncMode) String() string {
	if m == SyncNormal {
		return "normal"
	}
	return "full"
}

// FullPolicy says what a put does when the store is at its configured limit.
type FullPolicy int

const (
	// FullError makes the put fail at once with ErrStoreFull. The default.
	FullError FullPolicy = iota
	// FullBlock makes the put wait until space is freed or its context ends.
	FullBlock
)

// String returns "error" or "block".
func (p FullPolicy) String() string {
	if p == FullBlock {
		return "block"
	}
	return "error"
}

// Config configures a Store. The zero value of every field means its default.
type Config struct {
	// Path of the SQLite database file. Required.
	Path string
	// Sync is the durability mode of commits.
	Sync SyncMode
	// MaxBatch caps how many operations share one group commit (default 4096).
	MaxBatch int
	// MaxBytes caps the bytes of stored messages (default 0: no cap).
	MaxBytes int64
	// MaxMessages caps the count of stored messages (default 0: no cap).
	MaxMessages int64
	// OnFull says what a put does past MaxBytes or MaxMessages.
	OnFull FullPolicy
	// DedupeWindow is how long an accepted (origin, id) is remembered per
	// queue (default 24h).
	DedupeWindow time.Duration
	// DedupeMaxEntries caps the remembered (origin, id) pairs per queue
	// (default 1,000,000). The oldest are forgotten first.
	DedupeMaxEntries int
	// SweepInterval is the period of the expiry, lease and dedupe sweep
	// (default 1s).
	SweepInterval time.Duration
	// PrefetchMessages caps, per queue, the messages held in memory ready for
	// consumers (default 8192). Everything else stays on disk. A send
	// queue whose link backs up past it re-reads what arrives from disk,
	// which cost a relay an eighth of its CPU at 1024.
	PrefetchMessages int
	// PrefetchBytes caps, per queue, the bytes held in memory ready for
	// consumers (default 4 MiB).
	PrefetchBytes int
	// PrefetchTotalBytes caps the memory that all queues of the store
	// together hold ready for consumers, each message counted as its
	// encoded size plus its entry's (default 64 MiB). A queue past it
	// still reads 16 messages at a time from disk, so none starves.
	PrefetchTotalBytes int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// OnCommit, when set, is called by the writer goroutine after each
	// successful commit with the requests it carried and how long COMMIT
	// took (the fsync, in full mode). It runs outside any lock but on the
	// commit path, so it must be cheap and must not call the store.
	OnCommit func(requests int, took time.Duration)
	// Logger receives lifecycle logs; slog.Default() when nil.
	Logger *slog.Logger
}

// Policy is the consumer-side behaviour of one queue.
type Policy struct {
	// MaxDeliveries is how many times a message is delivered before it moves
	// to the dead-letter address (default 10).
	MaxDeliveries int
	// DeadLetter is the queue that takes messages past MaxDeliveries
	// (default "<name>.dlq").
	DeadLetter string
	// ExpiryAddress, when set, takes expired messages instead of dropping them.
	ExpiryAddress string
	// LeaseTimeout is how long a delivered message stays in flight before it
	// is delivered again (default 30s).
	LeaseTimeout time.Duration
	// RedeliveryDelay is the first backoff after a nack (default 1s). It
	// doubles with each delivery up to MaxRedeliveryDelay.
	RedeliveryDelay time.Duration
	// MaxRedeliveryDelay caps the nack backoff (default 1m).
	MaxRedeliveryDelay time.Duration
}
