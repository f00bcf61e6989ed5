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
	"github.com/petrelmq/petrel/internal/ratelog"
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
	restarts   atomic.Int64 // times the log was seen to start over, for tests
	failures   atomic.Int64 // checkpoints that failed, for tests
	ckptMu     sync.Mutex
	// failLog holds back the lines of failed checkpoints: while the disk
	// is full every one fails, ten times a second (6,016 lines in ten
	// minutes, seen on a full tmpfs).
	failLog ratelog.Limiter
}

// checkpointLoop runs passive WAL checkpoints on its own connection, so
// that the writer never does: with SQLite's automatic checkpoint, every
// thousandth page made one unlucky commit copy the log into the database
// and fsync it, on the writer's time. A passive checkpoint runs beside the
// writer and never blocks it.
//
// But the writer starts the log over only when a checkpoint caught up with
// it, which a busy writer never lets a passive one do. So once the log
// passes walRestartFrames, the checkpointer asks the writer to checkpoint
// between two batches (see maybeRestartWAL), which copies the little
// written since the passive one, so that the writer's next commit starts
// the log over. The checkpointer used to run a RESTART checkpoint itself:
// it had to win the write lock from a writer that commits back to back,
// sleeping between tries for up to hundreds of milliseconds while the log
// grew, and then held the writer for the copy of all that had grown
// meanwhile, while the writer slept its own busy-handler backoff: tens of
// milliseconds at the tail of every message's latency.
func (s *Store) checkpointLoop(ctx context.Context, conn *rawConn) {
	defer conn.close()
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	dest := make([]driver.Value, 3)
	var lastFrames int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.wal.restartDue.Load() {
			// The writer is to checkpoint after its current batch: a
			// checkpoint here now could take the lock from it again and
			// again. Give it a moment; an idle writer does not take it,
			// and then this checkpoint catches up with the log, the
			// writer's next commit starts it over by itself, and the log
			// is synced every interval as sync normal needs.
			select {
			case <-ctx.Done():
				return
			case <-time.After(checkpointInterval / 10):
			}
			if !s.wal.restartDue.Load() {
				continue
			}
		}
		s.wal.ckptMu.Lock()
		err := conn.queryRow(`PRAGMA wal_checkpoint(PASSIVE)`, nil, dest)
		s.wal.ckptMu.Unlock()
		if err != nil && !errors.Is(err, errNoRows) {
			s.checkpointFailed(err)
			continue
		}
		frames, _ := dest[1].(int64)
		if frames < lastFrames {
			s.wal.restarts.Add(1)
		}
		lastFrames = frames
		if frames > walRestartFrames {
			s.wal.restartDue.Store(true)
		}
	}
}

// maybeRestartWAL runs, on the writer's connection between two batches,
// the checkpoint the checkpointer asked for: a passive one, which copies
// what was written since the checkpointer's and so catches up with the
// log, since the writer writes nothing meanwhile. The writer's next commit
// then starts the log over by itself, unless a reader is still on the log;
// then the checkpointer asks again. A RESTART checkpoint would instead wait
// for such a reader, in the busy handler's sleeps, holding up every commit.
// If the checkpointer is checkpointing right now, it tries again after the
// next batch.
func (w *writer) maybeRestartWAL() {
	s := w.s
	if !s.wal.restartDue.Load() || !s.wal.ckptMu.TryLock() {
		return
	}
	defer s.wal.ckptMu.Unlock()
	s.wal.restartDue.Store(false)
	dest := make([]driver.Value, 3)
	if err := w.conn.queryRow(`PRAGMA wal_checkpoint(PASSIVE)`, nil, dest); err != nil && !errors.Is(err, errNoRows) {
		s.checkpointFailed(err)
	}
}

// checkpointFailed logs a failed checkpoint, at most once a minute: the
// line that gets through counts those held back (suppressed). A failed
// checkpoint is tried again at the next interval by itself.
func (s *Store) checkpointFailed(err error) {
	s.wal.failures.Add(1)
	if held, ok := s.wal.failLog.Allow("checkpoint"); ok {
		s.log.Warn("checkpoint failed (logged once a minute)", slog.Any(logkey.Error, err), slog.Int64("suppressed", held))
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
