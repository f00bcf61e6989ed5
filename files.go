package petrel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/sender"
	"github.com/petrelmq/petrel/session"
)

// PropNotify is the application property of a file message that names
// the address to which a notice goes when the transfer ends: a data
// message with DataType FileNoticeType, sent by the destination once the
// file is delivered, or by the node where it failed for good.
const PropNotify = "petrel.notify"

// FileNoticeType is the DataType of a file transfer notice. Its properties:
// status ("complete" or "failed"), reason (when failed), filename,
// filesize, fileChecksum, fileMessageID, node (where it was decided) and,
// when complete, receivedFilePath.
const FileNoticeType = "petrel.file-notice"

// ErrNoFile is returned by Send for a file message without a file to send.
var ErrNoFile = errors.New("file message names no file")

func (c FilesConfig) withDefaults(dataDir string) FilesConfig {
	if c.Spool == "" {
		c.Spool = filepath.Join(dataDir, "spool")
	}
	if c.Received == "" {
		c.Received = filepath.Join(dataDir, "received")
	}
	if c.AbandonAfter <= 0 {
		c.AbandonAfter = 7 * 24 * time.Hour
	}
	return c
}

// dropAbandoned removes the partly received files that made no progress
// for AbandonAfter: their senders gave them up without a word (a node
// that was rebuilt, a message that expired), and they would hold spool
// space forever. It runs at start and then every hour.
func (n *Node) dropAbandoned() {
	pending, err := n.spool.Pending()
	if err != nil {
		n.log.Warn("list the spool", slog.Any(logkey.Error, err))
		return
	}
	for _, p := range pending {
		if time.Since(p.Touched) < n.files.AbandonAfter {
			continue
		}
		if err := n.spool.Discard(p.ID); err != nil {
			if !errors.Is(err, filetransfer.ErrBusy) {
				n.log.Warn("drop an abandoned transfer", slog.String(logkey.ID, p.ID), slog.Any(logkey.Error, err))
			}
			continue
		}
		n.log.Info("dropped a transfer that made no progress", slog.String(logkey.ID, p.ID), slog.String(logkey.File, p.Info.Filename),
			slog.Int64(logkey.Offset, p.Offset), slog.Duration("abandon_after", n.files.AbandonAfter))
	}
}

// janitor runs dropAbandoned and dropFailedHeld every hour until stop is
// closed.
func (n *Node) janitor(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n.dropAbandoned()
			n.dropFailedHeld()
		}
	}
}

// heldRoot is where a relay keeps the files it forwards: in the spool's
// filesystem, so that taking one is a link, not a copy.
func (n *Node) heldRoot() string { return filepath.Join(n.files.Spool, "held") }

// receivedDir is the folder the files for the local address name go to.
func (n *Node) receivedDir(name string) string {
	n.mu.Lock()
	a := n.addresses[name]
	n.mu.Unlock()
	if a.ReceivedDir != "" {
		return a.ReceivedDir
	}
	return filepath.Join(n.files.Received, name)
}

func (n *Node) openSpool() error {
	opts := []filetransfer.SpoolOption{filetransfer.WithLogger(n.cfg.Logger)}
	if n.files.BufferedWrites {
		opts = append(opts, filetransfer.WithBufferedWrites())
	}
	sp, err := filetransfer.OpenSpool(n.files.Spool, opts...)
	if err != nil {
		return err
	}
	n.spool = sp
	return nil
}

// senderFiles is the file side of the senders' configuration.
func (n *Node) senderFiles() sender.FileConfig {
	f := n.files
	if f.ChunkSize == 0 {
		// A chunk travels in one Data frame: the default shrinks to fit a
		// small max_frame (an explicit one is validated against it).
		f.ChunkSize = sender.DefaultChunkSize
		if mf := n.cfg.Link.MaxFrame; mf > 8 && mf-8 < f.ChunkSize {
			f.ChunkSize = mf - 8
		}
	}
	return sender.FileConfig{ChunkSize: f.ChunkSize, Window: f.Window, Concurrency: f.Concurrency, Done: n.fileDone, Source: n.fileSource, Checksums: n.checksums}
}

// prepareFile describes the file a file message sends, as Send is called:
// name, size, SHA-256 and the identifiers, and records its modification
// time so that the sender notices a change. dest is the destination in
// full, name@node. With later, a file with content is not read: its
// checksum is left empty, to follow (see Node.sendFile).
//
// The file is read, now and by its sender later, without following a
// symbolic link in the last part of its path (see filetransfer's
// ErrNotRegular). With follow, a caller that names a link means the file
// it points to: the path is resolved here, once, and the link's name is
// the one sent. An outbox does not follow: whoever writes into its folder
// could point a link at any file the node may read.
func (n *Node) prepareFile(ctx context.Context, m *message.Message, dest string, later, follow bool) error {
	if m.File.SendFilePath == "" {
		return fmt.Errorf("send file to %q: set File.SendFilePath: %w", m.Destination, ErrNoFile)
	}
	path, err := filepath.Abs(m.File.SendFilePath)
	if err != nil {
		return fmt.Errorf("send file %q: %w", m.File.SendFilePath, err)
	}
	name := filepath.Base(path)
	if follow {
		if path, err = filepath.EvalSymlinks(path); err != nil {
			return fmt.Errorf("send file: %w", err)
		}
	}
	// A checksum the caller already has spares reading the whole file here;
	// a wrong one is refused as corrupt by the next hop (see Send).
	var info filetransfer.Info
	if sum := m.File.FileChecksum; sum != "" {
		info, err = filetransfer.DescribeKnown(path, sum)
	} else if later {
		info, err = filetransfer.DescribeLater(path)
		if err == nil && info.Size == 0 {
			// No content after which a checksum could follow: hashing
			// nothing costs nothing.
			info, err = filetransfer.DescribeContext(ctx, path)
		}
	} else {
		info, err = filetransfer.DescribeContext(ctx, path)
	}
	if err != nil {
		return fmt.Errorf("send file: %w", err)
	}
	info.Filename = name
	if m.File.Filename != "" {
		info.Filename = m.File.Filename
	}
	if err := filetransfer.CheckName(info.Filename); err != nil {
		return fmt.Errorf("send file %q: %w", path, err)
	}
	info.SetProps(&m.File)
	m.File.SendFilePath = path
	m.File.ReceivedFilePath = ""
	// Only a receiver records who handed a file over.
	m.Properties.Delete(filetransfer.PropHandedBy)
	m.Properties.Set(sender.PropSourceModTime, message.Int64(info.ModTime.UnixNano()))
	_, node, _ := message.ParseDestination(dest)
	if node == "" {
		node = n.cfg.Name
	}
	m.File.SrcIdentifier = n.cfg.Name
	m.File.DestIdentifier = node
	m.File.CenterIdentifier = ""
	if hop, ok := n.nextHop(node); ok && hop != node {
		m.File.CenterIdentifier = hop
	}
	return nil
}

// deliverLocal takes a file sent to an address of this node: it goes
// through the spool like a received one (copied, verified, placed), and
// its file message, with ReceivedFilePath, is the put returned.
func (n *Node) deliverLocal(ctx context.Context, m *message.Message, q *queue.Queue) (*filetransfer.Incoming, error) {
	info := filetransfer.InfoFromProps(m.File)
	src, err := filetransfer.OpenSource(m.File.SendFilePath, filetransfer.Info{
		Filename: info.Filename, Size: info.Size, SHA256: info.SHA256, ModTime: modTimeOf(m)})
	if err != nil {
		return nil, fmt.Errorf("send file: %w", err)
	}
	defer src.Close()
	in, err := n.spool.Begin(receiver.TransferID(m.Origin, m.ID), info)
	if err != nil {
		return nil, fmt.Errorf("send file: %w", err)
	}
	for at := in.Offset(); at < info.Size; {
		buf := make([]byte, 1<<20) // Write hashes it in the background
		if err := ctx.Err(); err != nil {
			in.Close()
			return nil, err
		}
		k, err := src.ReadChunk(at, buf)
		if err == nil {
			err = in.Write(at, buf[:k])
		}
		if err != nil && !errors.Is(err, io.EOF) {
			in.Close()
			return nil, fmt.Errorf("send file: %w", err)
		}
		at += int64(k)
	}
	if err := src.Verify(); err != nil {
		in.Abort(err.Error())
		return nil, fmt.Errorf("send file: %w", err)
	}
	name, _, _ := message.ParseDestination(q.Name())
	path, err := in.Deliver(n.receivedDir(name))
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("send file: %w", err)
	}
	m.File.ReceivedFilePath, m.File.SendFilePath = path, ""
	m.Properties.Delete(sender.PropSourceModTime)
	return in, nil
}

func modTimeOf(m *message.Message) time.Time {
	if v, ok := m.Properties.Get(sender.PropSourceModTime); ok {
		return time.Unix(0, v.Int64())
	}
	return time.Time{}
}

// inboundFile is where the router places a file: a file for an address
// this node receives is placed in its received folder; one it relays is
// held in the spool until forwarded.
func (n *Node) inboundFile(ctx context.Context, peer session.Peer, m *message.Message) (receiver.FileTarget, error) {
	q, err := n.inbound(ctx, peer, m)
	if err != nil {
		return receiver.FileTarget{}, err
	}
	if q.Kind() == queue.KindSend {
		dir, err := n.heldDir(m.Origin, m.ID)
		if err != nil {
			return receiver.FileTarget{}, fmt.Errorf("%w: %w", receiver.ErrRefused, err)
		}
		return receiver.FileTarget{Queue: q, Dir: dir, Relay: true}, nil
	}
	return receiver.FileTarget{Queue: q, Dir: n.receivedDir(q.Name())}, nil
}

// fileTaken is what the router does once a file is taken: at the
// destination, the completion notice.
func (n *Node) fileTaken(m *message.Message, t receiver.FileTarget) {
	if !t.Relay {
		n.notifyFile(m, nil)
	}
}

// fileDone is told by a sender that a file message left its send queue:
// handed over (err nil) or failed for good. It frees what this node held
// for it: a relay's copy, an outbox's file, each found from the node's own
// records, never from a path the message names; and a failure is noticed.
func (n *Node) fileDone(m *message.Message, err error) {
	n.recordOutcome(m, filetransfer.StateHandedOver, err)
	if err != nil && m.Origin != n.id {
		// Refused after this relay took custody: its copy is the only
		// whole one, which the dead letter's replay sends.
		n.keepFailedHeld(m)
	} else {
		n.dropHeld(m)
	}
	n.outboxDone(m, err)
	if err != nil {
		n.notifyFile(m, err)
	}
}

// notifyFile sends the notice of m's end to the address m names in
// PropNotify, if any, and if the peer that handed m over may send there.
func (n *Node) notifyFile(m *message.Message, failure error) {
	v, ok := m.Properties.Get(PropNotify)
	if !ok || v.Str() == "" {
		return
	}
	if n.authorizeNotice(m, v.Str()) != nil {
		return
	}
	p := n.Producer()
	notice := p.CreateDataMessage(v.Str())
	notice.Data.DataType = FileNoticeType
	status := "complete"
	if failure != nil {
		status = "failed"
		notice.Properties.Set("reason", message.String(failure.Error()))
	} else {
		notice.Properties.Set("receivedFilePath", message.String(m.File.ReceivedFilePath))
	}
	notice.Properties.Set("status", message.String(status))
	notice.Properties.Set("filename", message.String(m.File.Filename))
	notice.Properties.Set("filesize", message.Int64(m.File.Filesize))
	notice.Properties.Set("fileChecksum", message.String(m.File.FileChecksum))
	notice.Properties.Set("fileMessageID", message.Int64(int64(m.ID)))
	notice.Properties.Set("node", message.String(n.cfg.Name))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Send(ctx, notice); err != nil {
		n.log.Warn("file notice not sent", slog.String(logkey.To, v.Str()), slog.String(logkey.File, m.File.Filename), slog.Any(logkey.Error, err))
	}
}

// authorizeNotice judges the notice of m to the address to as the peer
// that handed m to this node would be judged sending it: the node sends it
// on that peer's behalf, so that peer's rights are the most it may have.
// A file this node created is its own, and not judged. A denial is
// counted, and logged at most once a minute per peer (a bounded
// ratelog.Limiter); it is returned for the caller to drop the notice.
func (n *Node) authorizeNotice(m *message.Message, to string) error {
	by, ok := m.Properties.Get(filetransfer.PropHandedBy)
	if !ok {
		return nil
	}
	action, err := n.actionFor(to)
	if err == nil {
		err = n.Authorize(by.Str(), action, to)
	}
	if err == nil {
		return nil
	}
	n.access.noticesDenied.Add(1)
	level, held := slog.LevelDebug, int64(0)
	if h, ok := n.access.noticeLog.Allow(by.Str()); ok {
		level, held = slog.LevelWarn, h
	}
	n.log.Log(context.Background(), level, "file notice not sent: the peer that handed the file over may not send there (logged once a minute per peer)",
		slog.String(logkey.Peer, by.Str()), slog.String(logkey.To, to), slog.String(logkey.File, m.File.Filename),
		slog.Any(logkey.Error, err), slog.Int64("suppressed", held))
	return err
}

// giveUpHash records in the store that the hash of m's file failed, with
// err, then tells its sender. The record outlives a restart (see
// loadGivenUp): a node that stops before its sender gave the file up
// (its link was down, say) gives it up once restarted, rather than hashing
// the file itself and delivering a file whose Send failed. The sender's
// settle removes it (forgetGivenUp).
func (n *Node) giveUpHash(m *message.Message, err error, hashed func(string, error)) {
	reason := err.Error()
	if len(reason) > maxGivenUpReason {
		reason = reason[:maxGivenUpReason]
	}
	// The record goes with its message, which may instead expire unsent
	// while its link is down: it then goes at the first start after that
	// (see loadGivenUp). Now + TTL is never before the message's expiry,
	// which counts from when it was stored.
	var expires int64
	if m.TTL > 0 {
		expires = n.now().Add(m.TTL).UnixNano()
	}
	rec := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(reason)), uint64(expires))
	rec = append(rec, reason...)
	if serr := n.store.SetMeta(context.Background(), givenUpKey(m.Origin, m.ID), rec); serr != nil {
		n.log.Warn("cannot record that a file's hash failed; should the node stop before its sender gives the file up, it sends the file after its restart",
			slog.Uint64("msg_id", m.ID), slog.Any(logkey.Error, serr))
	}
	hashed("", err)
}

// maxGivenUpReason bounds the reason kept with a given-up hash.
const maxGivenUpReason = 1024

// givenUpPrefix starts the store's meta keys of the files whose hash
// failed after their message was stored: givenUpKey.
const givenUpPrefix = "file-given-up:"

func givenUpKey(origin message.NodeID, id uint64) string {
	return givenUpPrefix + origin.String() + ":" + strconv.FormatUint(id, 10)
}

// loadGivenUp gives the senders back, at the node's start, the files whose
// hash failed before the node stopped and whose messages were not settled
// yet.
func (n *Node) loadGivenUp(ctx context.Context) error {
	keys, values, err := n.store.MetaPrefix(ctx, givenUpPrefix)
	if err != nil {
		return err
	}
	now := n.now().UnixNano()
	for i, k := range keys {
		o, idText, _ := strings.Cut(strings.TrimPrefix(k, givenUpPrefix), ":")
		origin, oerr := message.ParseNodeID(o)
		id, ierr := strconv.ParseUint(idText, 10, 64)
		rec := values[i]
		if oerr != nil || ierr != nil || len(rec) < 8 {
			n.log.Warn("dropping an unreadable record of a failed file hash", slog.String("key", k))
		} else if exp := int64(binary.BigEndian.Uint64(rec)); exp == 0 || exp > now {
			n.checksums.GivenUp(origin, id, errors.New(string(rec[8:])))
			continue
		}
		// Unreadable, or past its message's expiry (unix nanos; 0 for
		// never): that message was swept unsent, and no sender will
		// settle it.
		if err := n.store.SetMeta(ctx, k, nil); err != nil {
			return err
		}
	}
	return nil
}

// forgetGivenUp removes the record of a failed hash once its file message
// was given up.
func (n *Node) forgetGivenUp(origin message.NodeID, id uint64) {
	if err := n.store.SetMeta(context.Background(), givenUpKey(origin, id), nil); err != nil && !errors.Is(err, queue.ErrClosed) {
		n.log.Warn("cannot remove the record of a failed file hash", slog.Uint64("msg_id", id), slog.Any(logkey.Error, err))
	}
}

// checkNotify refuses a file message whose PropNotify is no address. The
// notice is sent only once the file has gone, when an address it cannot
// go to would be logged and the notice lost: the send is refused now,
// with the reason, wrapping message.ErrDestination.
func checkNotify(m *message.Message) error {
	v, ok := m.Properties.Get(PropNotify)
	if !ok || v.Str() == "" {
		return nil
	}
	if _, _, err := message.ParseDestination(v.Str()); err != nil {
		return fmt.Errorf("send file: notify %q: %w", v.Str(), err)
	}
	return nil
}
