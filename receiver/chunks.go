package receiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/session"
)

// receiveChunks appends chunks until the file is whole. It acks what it
// received every half window of chunks, so that the sender never waits
// for a disk, and checkpoints (makes the bytes durable, which is where a
// later session resumes) every FileSyncBytes and whenever the sender
// pauses. The final ack, of the whole size, comes only after takeFile.
func (s *Server) receiveChunks(ctx context.Context, sess *session.Session, in *filetransfer.Incoming, tr *transfer) error {
	syncBytes := s.cfg.FileSyncBytes
	if syncBytes <= 0 {
		syncBytes = DefaultFileSyncBytes
	}
	r := &chunkReader{
		s: s, sess: sess, in: in, tr: tr,
		size: in.Info().Size, syncBytes: syncBytes, half: max(int(sess.Window())/2, 1),
	}
	return r.run(ctx)
}

// chunkReader is one file session's reading of chunks into its spooled
// file: what was written since the last ack and the last checkpoint.
type chunkReader struct {
	s    *Server
	sess *session.Session
	in   *filetransfer.Incoming
	tr   *transfer

	size      int64 // the file's size: the reader ends there
	syncBytes int64 // checkpoint once this many bytes are unsynced
	half      int   // ack once this many chunks are unacked

	unsynced int64 // bytes written since the last checkpoint
	unacked  int   // chunks written since the last ack
}

// run takes chunks until the file is whole, and stops short, with what
// arrived checkpointed, when the server drains.
func (r *chunkReader) run(ctx context.Context) error {
	rctx, rcancel := r.s.readCtx(ctx)
	defer rcancel()
	for r.in.Written() < r.size {
		d, ok := r.sess.TryRecv()
		if !ok && r.s.draining() && ctx.Err() == nil {
			// Shutting down: keep what arrived for the resume.
			if err := r.checkpoint(); err != nil {
				return err
			}
			return errDrained
		}
		if !ok {
			var err error
			if d, ok, err = r.wait(ctx, rctx); err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if err := r.take(d); err != nil {
			return err
		}
	}
	// The last bytes are synced by Deliver, before the file gets its name.
	if r.in.Info().Pending() {
		return r.trailer(ctx, rctx)
	}
	return nil
}

// trailer takes the packet that must follow the last byte of a file whose
// checksum follows: the checksum (session.FileChecksumSeq), or an abort.
// The checksum is set on the Incoming, which Deliver verifies against.
// Nothing is acked meanwhile: every byte is here, and an ack of the size
// would pass custody.
func (r *chunkReader) trailer(ctx, rctx context.Context) error {
	r.tr.received(r.in.Written()) // every byte is here; custody waits for the checksum
	d, err := r.sess.Recv(rctx)
	if err != nil && r.s.draining() && ctx.Err() == nil {
		// Shutting down: what is durable stays below the size (see
		// Incoming.Sync), and the next session sends the rest again.
		return errDrained
	}
	if err != nil {
		return err
	}
	defer d.Release()
	switch d.Seq {
	case session.FileAbortSeq:
		return r.abort(string(d.Message))
	case session.FileChecksumSeq:
	default:
		return fmt.Errorf("%w: after the last byte of a file whose checksum follows, seq %d instead of the checksum (seq %d) or an abort",
			session.ErrProtocol, d.Seq, session.FileChecksumSeq)
	}
	sum, err := session.ParseFileChecksum(d.Message)
	if err != nil {
		return fmt.Errorf("%w: the checksum that follows the file: %w", session.ErrProtocol, err)
	}
	return r.in.SetChecksum(sum)
}

// wait is called when no chunk is buffered: it acks what arrived, then
// waits for the next chunk (bounded by rctx, the idle read deadline). ok
// false with no error means there is nothing to take yet: the sender
// paused and what arrived was checkpointed, or the server is draining,
// which run's next round handles.
func (r *chunkReader) wait(ctx, rctx context.Context) (d session.Data, ok bool, err error) {
	if err := r.ack(); err != nil {
		return d, false, err
	}
	if r.unsynced > 0 {
		// The sender paused: if nothing comes for a moment, make what
		// arrived durable.
		d, err = recvWithin(rctx, r.sess, fileIdleSync)
		if errors.Is(err, context.DeadlineExceeded) {
			return d, false, r.checkpoint()
		}
	} else {
		d, err = r.sess.Recv(rctx)
	}
	if err != nil && r.s.draining() && ctx.Err() == nil {
		return d, false, nil
	}
	return d, err == nil, err
}

// take appends one chunk, or ends the transfer if the sender gave it up,
// then checkpoints and acks when their thresholds are reached.
func (r *chunkReader) take(d session.Data) error {
	if d.Seq == session.FileAbortSeq {
		return r.abort(string(d.Message))
	}
	if d.Seq == session.FileChecksumSeq {
		return fmt.Errorf("%w: the checksum that follows a file came at byte %d of %d", session.ErrProtocol, r.in.Written(), r.size)
	}
	at := r.in.Written()
	if len(d.Message) == 0 || d.Seq != uint64(at)+uint64(len(d.Message)) {
		return fmt.Errorf("%w: chunk of %d bytes ending at %d; the file stands at %d", session.ErrProtocol, len(d.Message), d.Seq, at)
	}
	n := int64(len(d.Message))
	// The chunk's buffer goes back to the session's pool once hashed.
	if err := r.in.WriteThen(at, d.Message, d.Release); err != nil {
		return err
	}
	r.s.stats.FileBytes.Add(n)
	r.unsynced += n
	r.unacked++
	if r.unsynced >= r.syncBytes {
		if err := r.checkpoint(); err != nil {
			return err
		}
	}
	if r.unacked >= r.half {
		return r.ack()
	}
	return nil
}

// abort drops the partial file the sender gave up.
func (r *chunkReader) abort(reason string) error {
	if err := r.in.Abort("the sender gave it up: " + reason); err != nil {
		return err
	}
	r.s.stats.FilesAborted.Add(1)
	return fmt.Errorf("%w: %s", errAborted, reason)
}

// ack tells the sender how far the file arrived, if anything arrived
// since the last ack.
func (r *chunkReader) ack() error {
	// Never the whole size: that ack means custody, and only takeFile
	// sends it.
	if r.unacked == 0 || r.in.Written() >= r.size {
		return nil
	}
	r.unacked = 0
	r.tr.received(r.in.Written())
	if err := r.sess.Ack(uint64(r.in.Written())); err != nil && !errors.Is(err, session.ErrClosed) {
		return err
	}
	// A session the sender closed takes no ack, but what it sent before
	// closing is still to be read: an abort among it must drop the
	// partial file rather than leave it to be resumed. Recv returns that,
	// then the session's end.
	return nil
}

// checkpoint makes what arrived durable: a later session resumes there.
func (r *chunkReader) checkpoint() error {
	if err := r.in.Sync(); err != nil {
		return err
	}
	r.unsynced = 0
	r.tr.progress(r.in.Offset())
	return nil
}

func recvWithin(ctx context.Context, sess *session.Session, d time.Duration) (session.Data, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	data, err := sess.Recv(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return data, context.DeadlineExceeded
	}
	return data, err
}
