package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// A file session (session.Conn.OpenFile) carries one file: its
// announcement, then its content. The sequence numbers are byte offsets:
//
//	sender                                         receiver
//	Data seq=0  the file message, encoded  ---->   route it, open the spool
//	                                       <----   DataAck seq=R   resume at byte R (R < size)
//	                                       <----   DataAck seq=size   already here: done
//	                                       <----   Refuse seq=0    refused for good, with why
//	Data seq=E  bytes [R, E) of the file   ---->   E = R + chunk length; appended
//	Data seq=E' bytes [E, E')              ---->
//	                                       <----   DataAck seq=D   bytes [0, D) arrived (flow
//	                                                                  control; what is durable is
//	                                                                  where a later session resumes)
//	...
//	                                       <----   DataAck seq=size   verified, delivered
//	                                                                  (or held) and the file
//	                                                                  message committed
//	                                       <----   Refuse seq=size the content failed its
//	                                                                  SHA-256; send it again
//	Data seq=2^64-1  why, UTF-8            ---->   the sender gives the file up (its
//	                                               source changed...): the partial
//	                                               file is removed from the spool
//
// The checksum may follow the content: an announcement of a file with
// content may leave fileChecksum empty, so that the origin starts the
// transfer while it still hashes the file. The sender then sends, after
// the last chunk (seq=size) and once it has the checksum:
//
//	Data seq=2^64-2  64 lowercase hex      ---->   the file's SHA-256: the receiver
//	                 digits, the SHA-256           verifies against it, then acks or
//	                                               refuses seq=size as above
//
// Anything else after the last chunk of such a file but an abort, or a
// payload that is not exactly 64 lowercase hex digits, is a protocol
// error. Until that packet has arrived and matched, the receiver never
// records the size as durable: a session cut before it resumes below the
// size (never with DataAck seq=size, which would pass custody of a file
// nobody verified), and the sender sends the rest and the checksum again.
// An empty file cannot have its checksum follow, and is refused. The file
// message the receiver commits carries the verified checksum. A relay
// that forwards such a file while it still receives it announces it
// without the checksum too, and sends, after the last byte, the checksum
// it verified itself.
//
// DataAck seq=size is sent only once the receiver took custody: the file
// is whole, verified and placed, and its file message committed, so the
// sender may settle its own copy. Any earlier DataAck is below size and
// only paces the sender: the receiver checkpoints (fsyncs the bytes and
// records the offset and the running SHA-256) every FileSyncBytes, not at
// every ack, so that the disk does not set the pace of the link. A session
// that ends in between (a cut link, a restart) loses nothing: the next one
// is told the last checkpoint, and what came after it is sent again.

// FileTarget is where a node puts a file it takes.
type FileTarget struct {
	// Queue takes the file message once the content is whole: the receive
	// queue at the destination, the send queue toward it at a relay.
	Queue *queue.Queue
	// Dir is the folder the verified content is placed in.
	Dir string
	// Relay says the node holds the content to forward it: the file
	// message gets SendFilePath (where this node sends it from) instead of
	// ReceivedFilePath.
	Relay bool
}

// FileRouter is the part of a Router that takes files. A Router without
// it refuses file sessions.
type FileRouter interface {
	// InboundFile returns where the file that m announces goes. An error
	// wrapping ErrRefused refuses it for good; any other is transient.
	InboundFile(ctx context.Context, peer session.Peer, m *message.Message) (FileTarget, error)
	// FileTaken is called once the file message with the content's path
	// committed (not for a file that was already here).
	FileTaken(m *message.Message, t FileTarget)
}

// FileForwarder is an optional part of a FileRouter: a relay that
// forwards a file to the next hop while it still receives it
// (cut-through). ForwardFile takes src, the spooled part as it becomes
// durable, and closes it; it returns false if it starts nothing. Custody
// does not change: the upstream is acked only by takeFile, once the whole
// file is verified and its file message committed here.
type FileForwarder interface {
	ForwardFile(m *message.Message, t FileTarget, src *filetransfer.Follower) bool
}

// forwardEarly offers the file being received to the router's
// FileForwarder, if it has one. Nothing here depends on the outcome.
func (s *Server) forwardEarly(m *message.Message, t FileTarget, in *filetransfer.Incoming) {
	ff, ok := s.router.(FileForwarder)
	if !ok {
		return
	}
	src, err := in.Follow()
	if err != nil {
		return
	}
	ff.ForwardFile(m.Clone(), t, src)
}

// Defaults of the file settings in Config.
const (
	DefaultFileSyncBytes = 16 << 20
	// fileIdleSync: chunks unsynced for this long are synced and acked
	// even short of FileSyncBytes, so a slow sender still sees progress.
	fileIdleSync = 50 * time.Millisecond
)

// emptySHA256 is the SHA-256 of no bytes, hex.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// errAborted ends a file session whose sender gave the file up.
var errAborted = errors.New("the sender gave the file up")

// errSuperseded ends a file session whose transfer a newer session of the
// same peer took over (see holders).
var errSuperseded = errors.New("a newer session of the same sender took this transfer over")

// TransferID is the spool id of the transfer of the file message (origin,
// id): the same at every hop, so that a resend finds its partial file.
func TransferID(origin message.NodeID, id uint64) string {
	return origin.String() + "-" + strconv.FormatUint(id, 10)
}

// fileLoop receives the file of one file session.
func (s *Server) fileLoop(c *session.Conn, sess *session.Session) {
	ctx, cancel := s.ctxOf(c)
	defer cancel()
	err := s.receiveFile(ctx, c, sess)
	if errors.Is(err, errDrained) {
		s.closeDrained(sess)
		return
	}
	if errors.Is(err, filetransfer.ErrSpoolFull) && ctx.Err() == nil {
		s.endSpoolFull(c.Peer(), sess, err)
		return
	}
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, session.ErrClosed),
		errors.Is(err, errAborted):
		return
	case isProtocol(err):
		s.stats.ProtocolErrors.Add(1)
	}
	s.log.Warn("file session ended", slog.String(logkey.Peer, sess.Peer().Name), slog.Any(logkey.Error, err))
	sess.CloseWithin(err.Error(), 0)
}

// endSpoolFull ends sess, whose file this node had no disk room for
// (err), with session.CodeFull: the sender sees the pause as such
// (session.ErrFull), and waits longer and longer before it sends again,
// rather than sending what came after the checkpoint every reconnect
// backoff only to be ended at the same write. The transfer stays paused
// here, at its checkpoint. Logged once a minute per peer.
func (s *Server) endSpoolFull(peer session.Peer, sess *session.Session, err error) {
	if held, ok := s.fullLog.Allow(peer.Name); ok {
		s.log.Warn("spool full: file session ended, its sender tries again later (logged once a minute per peer)",
			slog.String(logkey.Peer, peer.Name), slog.Int64("suppressed", held), slog.Any(logkey.Error, err))
	}
	sess.Abort(session.CodeFull, "node "+s.cfg.Session.Name+": "+err.Error())
}

func (s *Server) receiveFile(ctx context.Context, c *session.Conn, sess *session.Session) (err error) {
	peer := c.Peer()
	rctx, rcancel := s.readCtx(ctx)
	d, err := sess.Recv(rctx)
	rcancel()
	if err != nil && s.draining() && ctx.Err() == nil {
		return errDrained
	}
	if err != nil {
		return err
	}
	if d.Seq != 0 {
		return fmt.Errorf("%w: a file session starts with its announcement, seq 0, not %d", session.ErrProtocol, d.Seq)
	}
	s.stats.FilesAnnounced.Add(1)
	m, t, refusal, err := s.announced(ctx, peer, d.Message)
	if err != nil {
		return err
	}
	if refusal != "" {
		s.stats.FilesRefused.Add(1)
		why := refusal
		if !strings.HasPrefix(why, "refused") {
			why = "refused: " + why
		}
		s.transfers.endedFailed(announcedID(m), m, peer.Name, 0, errors.New(why))
		s.log.Warn("file refused", slog.String(logkey.Peer, peer.Name), slog.String(logkey.Reason, refusal))
		if err := sess.RefuseSeq(0, refusal); err != nil {
			return err
		}
		return s.waitClose(ctx, sess)
	}
	size := m.File.Filesize
	if seen, err := t.Queue.Seen(ctx, m.Origin, m.ID); err != nil {
		return err
	} else if seen {
		// Taken before; the sender missed the final ack.
		if err := sess.Ack(uint64(size)); err != nil {
			return err
		}
		return s.waitClose(ctx, sess)
	}
	id := TransferID(m.Origin, m.ID)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in, err := s.beginFile(ctx, id, m, peer)
	if err != nil {
		s.transfers.failed(c, id, m, peer.Name, err)
		return fmt.Errorf("file %q from %s: %w", m.File.Filename, peer.Name, err)
	}
	defer s.holders.hold(id, peer.Name, func() { cancel(errSuperseded) })()
	defer func() {
		if context.Cause(ctx) == errSuperseded {
			err = errSuperseded
		}
	}()
	defer in.Close()
	tr := s.transfers.begin(c, id, m, peer.Name, in.Offset())
	defer s.transfers.end(tr)
	if in.Offset() < size {
		if t.Relay {
			s.forwardEarly(m, t, in)
		}
		if err := sess.Ack(uint64(in.Offset())); err != nil {
			return err
		}
		if err := s.receiveChunks(ctx, sess, in, tr); err != nil {
			if errors.Is(err, filetransfer.ErrCorrupt) {
				// The checksum that followed contradicts the one known.
				if err := s.refuseCorrupt(sess, m, tr, err); err != nil {
					return err
				}
				return s.waitClose(ctx, sess)
			}
			if errors.Is(err, errAborted) {
				s.transfers.endedFailed(id, m, peer.Name, in.Written(), err)
			} else {
				s.transfers.paused(tr, err)
			}
			return err
		}
	}
	if err := s.takeFile(ctx, sess, in, m, t, tr); err != nil {
		return err
	}
	s.transfers.end(tr)
	return s.waitClose(ctx, sess)
}

// beginFile opens the transfer's partial file in the spool. If an older
// session of the same peer still holds it, that session is ended first
// (see holders), waiting at most the handshake timeout.
func (s *Server) beginFile(ctx context.Context, id string, m *message.Message, peer session.Peer) (*filetransfer.Incoming, error) {
	info := filetransfer.InfoFromProps(m.File)
	in, err := s.beginSpool(peer.Name, id, info)
	if !errors.Is(err, filetransfer.ErrBusy) {
		return in, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.handshakeTimeout())
	defer cancel()
	if !s.holders.takeOver(wctx, id, peer.Name) {
		return nil, err
	}
	return s.beginSpool(peer.Name, id, info)
}

// announced checks the announcement and routes it. A refusal for good is
// returned as a reason, with the message when it decoded; an error is
// transient.
func (s *Server) announced(ctx context.Context, peer session.Peer, b []byte) (*message.Message, FileTarget, string, error) {
	fr, ok := s.router.(FileRouter)
	if !ok || s.cfg.Spool == nil {
		return nil, FileTarget{}, "this node takes no files", nil
	}
	m, err := message.Decode(b, s.cfg.Limits)
	if err == nil {
		err = m.Validate(s.cfg.Limits) // what the node's own Producer refuses
	}
	if err != nil {
		return nil, FileTarget{}, "bad file announcement: " + err.Error(), nil
	}
	if m.Kind != message.KindFile {
		return m, FileTarget{}, fmt.Sprintf("a file session announced a %s message", m.Kind), nil
	}
	if reason := s.checkOrigin(peer, m, false); reason != "" {
		return m, FileTarget{}, reason, nil
	}
	if reason, err := s.interceptFile(ctx, peer, m, b); reason != "" || err != nil {
		return m, FileTarget{}, reason, err
	}
	localProps(m, peer)
	// The checksum may follow the content (see the drawing above), but
	// only for a file with content: an empty one is refused here.
	if err := filetransfer.InfoFromProps(m.File).CheckAnnounced(); err != nil {
		return m, FileTarget{}, "bad file announcement: " + err.Error(), nil
	}
	if m.File.Filesize == 0 && m.File.FileChecksum != emptySHA256 {
		// No content follows that could fail the check later: refuse the
		// announcement, which a checksum refusal of seq 0 would look like.
		return m, FileTarget{}, fmt.Sprintf("bad file announcement: %q is empty, but its checksum is not the SHA-256 of nothing: %v",
			m.File.Filename, filetransfer.ErrCorrupt), nil
	}
	if r := s.quotaRefusal(peer, m.File.Filesize); r != "" {
		return m, FileTarget{}, r, nil
	}
	t, err := fr.InboundFile(ctx, peer, m)
	if errors.Is(err, ErrRefused) {
		return m, FileTarget{}, err.Error(), nil
	}
	return m, t, "", err
}

// takeFile verifies and places the whole file, commits its file message
// and only then acks the whole size: custody passes here. A file that
// fails its checksum is refused instead.
func (s *Server) takeFile(ctx context.Context, sess *session.Session, in *filetransfer.Incoming, m *message.Message, t FileTarget, tr *transfer) error {
	size := uint64(m.File.Filesize)
	path, err := in.Deliver(t.Dir)
	if errors.Is(err, filetransfer.ErrCorrupt) {
		return s.refuseCorrupt(sess, m, tr, err)
	}
	if err != nil {
		return err
	}
	// The verified checksum, which the announcement may have left to
	// follow: the consumers and the next hop see it.
	m.File.FileChecksum = in.Info().SHA256
	if t.Relay {
		m.File.SendFilePath, m.File.ReceivedFilePath = path, ""
	} else {
		m.File.SendFilePath, m.File.ReceivedFilePath = "", path
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("file message for %q: %w", path, err)
	}
	op, err := s.store.Submit([]queue.Put{{Queue: t.Queue, Msg: m, Data: data, Dedupe: true}})
	if err != nil {
		return err
	}
	if err := op.Wait(ctx); err != nil {
		return fmt.Errorf("store file message for %q: %w", path, err)
	}
	in.Finish()
	s.stats.FilesTaken.Add(1)
	if !op.Deduped(0) {
		// Custody passed: the file is listed as ended before the sender
		// hears it, so that whoever watches both sees the receiver first.
		s.transfers.taken(tr, t.Relay)
	}
	if err := sess.Ack(size); err != nil {
		return err
	}
	if !op.Deduped(0) {
		s.router.(FileRouter).FileTaken(m, t)
	}
	return nil
}

// refuseCorrupt refuses the whole size: the content failed its checksum
// and was removed, and the sender sends the file again from the start.
func (s *Server) refuseCorrupt(sess *session.Session, m *message.Message, tr *transfer, err error) error {
	size := m.File.Filesize
	s.stats.FilesCorrupt.Add(1)
	s.transfers.endedFailed(tr.st.ID, m, tr.st.From, size, fmt.Errorf("%w; the sender sends it again", err))
	return sess.RefuseSeq(uint64(size), err.Error())
}

// announcedID is the transfer id of the file m announces, "" when the
// announcement did not even decode.
func announcedID(m *message.Message) string {
	if m == nil {
		return ""
	}
	return TransferID(m.Origin, m.ID)
}

// waitClose waits for the sender to close the session after its last
// answer, so that the answer is not lost to a close racing it.
func (s *Server) waitClose(ctx context.Context, sess *session.Session) error {
	select {
	case <-sess.Done():
		return nil
	case <-s.drain.Done():
		return errDrained
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("the sender did not close the file session")
	}
}
