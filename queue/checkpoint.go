package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// checkpointInterval is how often the checkpointer copies the WAL into the
// database file.
const checkpointInterval = 100 * time.Millisecond

// walRestartFrames is the log size, in pages, past which the log is made to
// start over: 16 MiB with 4 KiB pages.
const walRestartFrames = 4096

// checkpointLoop runs WAL checkpoints on its own connection, so that the
// writer never does: with SQLite's automatic checkpoint, every thousandth
// page made one unlucky commit copy the log into the database and fsync it,
// on the writer's time. A passive checkpoint runs beside the writer and
// never blocks it. But the writer starts the log over only when a
// checkpoint caught up with it, which a busy writer never lets a passive
// one do; so once the log passes walRestartFrames, a RESTART checkpoint
// copies the little that is left, holding the writer for that long, and
// the log starts over.
func (s *Store) checkpointLoop(ctx context.Context, conn *rawConn) {
	defer conn.close()
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	dest := make([]driver.Value, 3)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := conn.queryRow(`PRAGMA wal_checkpoint(PASSIVE)`, nil, dest); err != nil && !errors.Is(err, errNoRows) {
			s.log.Warn("checkpoint failed", slog.Any(logkey.Error, err))
			continue
		}
		if frames, _ := dest[1].(int64); frames > walRestartFrames {
			if err := conn.queryRow(`PRAGMA wal_checkpoint(RESTART)`, nil, dest); err != nil && !errors.Is(err, errNoRows) {
				s.log.Warn("checkpoint failed", slog.Any(logkey.Error, err))
			}
		}
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
