package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// checkpointInterval is how often the checkpointer copies the WAL into the
// database file.
const checkpointInterval = 100 * time.Millisecond

// walRestartFrames is the log size, in pages, past which the log is made to
// start over: 16 MiB with 4 KiB pages. A variable for the tests.
var walRestartFrames int64 = 4096

// walState is what the checkpointer tells the writer: that the log should
// start over. ckptMu is held by whichever of the two checkpoints, so that
// neither waits on the other inside SQLite (whose busy handler sleeps 1,
// 2, 5, 10... ms between tries, holding up whoever waits by as much).
type walState struct {
	restartDue atomic.Bool
	restarts   atomic.Int64 // RESTART checkpoints that completed, for tests
	ckptMu     sync.Mutex
}

// checkpointLoop runs passive WAL checkpoints on its own connection, so
// that the writer never does: with SQLite's automatic checkpoint, every
// thousandth page made one unlucky commit copy the log into the database
// and fsync it, on the writer's time. A passive checkpoint runs beside the
// writer and never blocks it.
//
// But the writer starts the log over only when a checkpoint caught up with
// it, which a busy writer never lets a passive one do. So once the log
// passes walRestartFrames, the checkpointer asks the writer to run a
// RESTART checkpoint between two batches (see maybeRestartWAL), which
// copies the little written since the passive one and starts the log over.
// The checkpointer used to run that RESTART itself: it had to win the
// write lock from a writer that commits back to back, sleeping between
// tries for up to hundreds of milliseconds while the log grew, and then
// held the writer for the copy of all that had grown meanwhile, while the
// writer slept its own busy-handler backoff: tens of milliseconds at the
// tail of every message's latency.
func (s *Store) checkpointLoop(ctx context.Context, conn *rawConn) {
	defer conn.close()
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	dest := make([]driver.Value, 3)
	yielded := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.wal.restartDue.Load() && !yielded {
			// The writer is to restart the log after its current batch:
			// a passive checkpoint now could take the lock from it again
			// and again. An idle writer does not take it; then the next
			// passive checkpoint catches up with the log, and the writer's
			// next commit starts it over by itself.
			yielded = true
			continue
		}
		yielded = false
		s.wal.ckptMu.Lock()
		err := conn.queryRow(`PRAGMA wal_checkpoint(PASSIVE)`, nil, dest)
		s.wal.ckptMu.Unlock()
		if err != nil && !errors.Is(err, errNoRows) {
			s.log.Warn("checkpoint failed", slog.Any(logkey.Error, err))
			continue
		}
		if frames, _ := dest[1].(int64); frames > walRestartFrames {
			s.wal.restartDue.Store(true)
		}
	}
}

// maybeRestartWAL runs, on the writer's connection between two batches, the
// RESTART checkpoint the checkpointer asked for. If the checkpointer is
// checkpointing right now, it tries again after the next batch.
func (w *writer) maybeRestartWAL() {
	s := w.s
	if !s.wal.restartDue.Load() || !s.wal.ckptMu.TryLock() {
		return
	}
	defer s.wal.ckptMu.Unlock()
	s.wal.restartDue.Store(false)
	dest := make([]driver.Value, 3)
	err := w.conn.queryRow(`PRAGMA wal_checkpoint(RESTART)`, nil, dest)
	if err != nil && !errors.Is(err, errNoRows) {
		s.log.Warn("checkpoint failed", slog.Any(logkey.Error, err))
		return
	}
	if busy, _ := dest[0].(int64); busy == 0 {
		s.wal.restarts.Add(1)
	}
}

// openCheckpointer opens the checkpointer's connection and turns off the
// automatic checkpoint of the writer's.
func (s *Store) openCheckpointer() (*rawConn, error) {
	if _, err := s.w.conn.exec(`PRAGMA wal_autocheckpoint = 0`); err != nil {
		return nil, fmt.Errorf("turn off auto checkpoint: %w", err)
	}
	conn, err := openRaw(dsn(s.cfg.Path, s.cfg.Sync, false))
	if err != nil {
		return nil, fmt.Errorf("open checkpointer on %s: %w", s.cfg.Path, err)
	}
	return conn, nil
}
