package sender

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Cut-through: a relay forwards a file to the next hop while it still
// receives it. The forward is an early start of the file session the
// relay's sender would open anyway, and nothing more:
//
//   - it reads the relay's spooled part through a filetransfer.Follower,
//     only what is durable there, so the next hop never holds a byte the
//     relay could lose in a crash;
//   - it settles nothing: the file message is not in the send queue yet
//     (the relay commits it, and acks its upstream, only once the whole
//     file is verified and durable here). When the message is committed
//     and leased, transferFile first waits for the forward to end, then
//     announces the file as always: the next hop answers "already here"
//     (it deduplicates on the message's origin and id) or the offset it
//     holds, and custody passes then, on the usual path;
//   - it fails quietly: whatever stops it (the upstream pauses, the relay
//     or the next hop restarts, the link breaks) leaves the next hop with
//     a partial file at a checkpoint, which the next session resumes;
//   - but an upstream that gives the file up for good (its source changed
//     or was removed) aborts it here, and the forward passes the abort on
//     (filetransfer.ErrAborted): no session would ever resume the next
//     hop's part, which would hold its spool quota until abandon_after.

// earlyKey names a file message: its origin and id.
type earlyKey struct {
	origin message.NodeID
	id     uint64
}

// Forward starts sending m's content, read from src, to the next hop
// while this node still receives it (see the comment above). It takes src
// and closes it. It returns false, and starts nothing, when the sender is
// stopping, a forward of m already runs, or Concurrency forwards run: the
// file then goes on the usual path, once it is whole here.
func (s *Sender) Forward(m *message.Message, src *filetransfer.Follower) bool {
	f := &s.files
	key := earlyKey{m.Origin, m.ID}
	var expires time.Time // the TTL counts down from now, as in a queue
	if m.TTL > 0 {
		expires = time.Now().Add(m.TTL)
	}
	f.mu.Lock()
	if f.stopped || f.ctx == nil || f.ctx.Err() != nil || f.forwards[key] != nil || len(f.forwards) >= f.cfg.Concurrency {
		f.mu.Unlock()
		src.Close()
		return false
	}
	if f.forwards == nil {
		f.forwards = map[earlyKey]chan struct{}{}
	}
	done := make(chan struct{})
	f.forwards[key] = done
	f.wg.Add(1) // under mu, before stopFiles can Wait
	f.mu.Unlock()
	f.early.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.forwards, key)
			f.mu.Unlock()
			close(done)
		}()
		s.forward(f.ctx, m, src, expires)
	}()
	return true
}

// forward runs one early file session, and logs how it ended.
func (s *Sender) forward(ctx context.Context, m *message.Message, src *filetransfer.Follower, expires time.Time) {
	defer src.Close()
	if !expires.IsZero() {
		if m.TTL = time.Until(expires); m.TTL <= 0 {
			return // expired: never forwarded
		}
	}
	stop := context.AfterFunc(ctx, func() { src.Close() }) // ends a ReadChunk that waits
	defer stop()
	run, done := s.startRun(m)
	defer done()
	// A file whose checksum follows is forwarded without it too; after
	// the last byte, the forward sends the checksum this node verified,
	// which src has once the whole file is durable here.
	err := s.sendFile(ctx, m, func() (chunkSource, error) { return src, nil }, &followingSum{wait: src.Checksum}, run)
	log := s.log.With(slog.String(logkey.File, m.File.Filename), slog.Uint64("msg_id", m.ID))
	switch {
	case err == nil:
		log.Debug("file forwarded while it was received: the next hop has it")
	case errors.Is(err, filetransfer.ErrAborted):
		log.Info("early forward given up with the file: the next hop was told to drop its part", slog.Any(logkey.Error, err))
	case ctx.Err() != nil, errors.Is(err, filetransfer.ErrUnfinished), errors.Is(err, filetransfer.ErrClosed):
		log.Debug("early forward stopped; the file goes on once it is whole here", slog.Any(logkey.Error, err))
	default:
		log.Info("early forward failed; the file goes on once it is whole here", slog.Any(logkey.Error, err))
	}
}

// waitEarly returns once no forward of m runs, or ctx is done.
func (f *files) waitEarly(ctx context.Context, m *message.Message) {
	f.mu.Lock()
	done := f.forwards[earlyKey{m.Origin, m.ID}]
	f.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Forward starts the early forward of m, read from src, on the sender of
// the send queue q (see Sender.Forward). It returns false, closing src,
// when q has no running sender or that sender declines.
func (m *Manager) Forward(q *queue.Queue, msg *message.Message, src *filetransfer.Follower) bool {
	m.mu.Lock()
	s := m.senders[q]
	m.mu.Unlock()
	if s == nil {
		src.Close()
		return false
	}
	return s.Forward(msg, src)
}
