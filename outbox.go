package petrel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
)

// outboxes are the node's running outbox folders, by directory.
type outboxes struct {
	mu  sync.Mutex
	run map[string]*outboxRun
}

// outboxRun is one watched folder and the goroutine that sends what it
// finds: describing a file (its SHA-256) takes a while, and the watcher
// must not wait for it.
type outboxRun struct {
	cfg    OutboxConfig
	dir    string // absolute
	ob     *filetransfer.Outbox
	paths  chan string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// watching is closed once ob is set: the sending goroutine reads ob
	// for a file that fails at once, and the watcher offers the files
	// already in the folder before WatchOutbox returns it.
	watching chan struct{}
}

// outboxKey is the store's meta key that remembers the message id given
// to an outbox file, so that after a crash it is sent again under the same
// id, which dedupe then recognises.
func outboxKey(path string) string { return "outbox:" + path }

// outboxSentKey is the store's meta key that remembers, the other way
// round, which outbox file the message id was sent for: when the sender
// reports the message's end, the file that leaves the folder is found
// from this record, never from a path the message carries.
func outboxSentKey(id uint64) string { return "outbox-sent:" + strconv.FormatUint(id, 10) }

// outboxFinishedKey is the store's meta key that marks a message id whose
// file was sent (or failed for good) but could not leave the outbox
// folder: the file is not sent again, only its move is tried again. Its
// value is outboxFinishedRecord's.
func outboxFinishedKey(id uint64) string { return "outbox-finished:" + strconv.FormatUint(id, 10) }

// outboxFinishedRecord is the value under outboxFinishedKey: "s" for a
// file that was sent, or "f" and the reason for one that failed.
func outboxFinishedRecord(err error) []byte {
	if err == nil {
		return []byte("s")
	}
	return []byte("f" + err.Error())
}

// parseOutboxFinished reads an outboxFinishedKey value: the transfer's
// outcome, nil for a file that was sent.
func parseOutboxFinished(rec []byte) error {
	if len(rec) > 0 && rec[0] == 'f' {
		return errors.New(string(rec[1:]))
	}
	return nil
}

// outboxSentRecord is the value under outboxSentKey: the outbox's after
// setting when it took the file, a NUL (no path holds one), the file's
// path, a NUL, and the FileID of the version sent. The file leaves the
// folder as that setting said even if the outbox is removed, or changed,
// before the transfer ends; and only that version leaves, not a file
// renamed in under its name meanwhile.
func outboxSentRecord(path, after string, sent filetransfer.FileID) []byte {
	return sent.AppendBinary([]byte(after + "\x00" + path + "\x00"))
}

// parseOutboxSent reads an outboxSentKey value. One written before the
// setting was recorded is the path alone, and says nothing of after; one
// written before the FileID was gives a zero sent.
func parseOutboxSent(rec []byte) (path, after string, sent filetransfer.FileID, known bool) {
	before, rest, known := strings.Cut(string(rec), "\x00")
	if !known {
		return before, "", filetransfer.FileID{}, false
	}
	path, id, _ := strings.Cut(rest, "\x00")
	sent, _ = filetransfer.ParseFileID([]byte(id))
	return path, before, sent, true
}

// startOutbox watches one folder. Files already in it are sent.
func (n *Node) startOutbox(c OutboxConfig) error {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("outbox %s: %w", c.Dir, err)
	}
	r := &outboxRun{cfg: c, dir: dir, paths: make(chan string, 1024), done: make(chan struct{}), watching: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		select {
		case <-r.watching:
		case <-r.ctx.Done():
			return
		}
		for {
			select {
			case <-r.ctx.Done():
				return
			case p := <-r.paths:
				n.sendOutboxFile(r, p)
			}
		}
	}()
	ob, err := filetransfer.WatchOutbox(filetransfer.OutboxConfig{Dir: dir, Quiet: c.Quiet, Logger: n.cfg.Logger},
		func(path string) {
			select {
			case r.paths <- path:
			case <-r.ctx.Done():
			}
		})
	if err != nil {
		r.cancel()
		<-r.done
		return fmt.Errorf("outbox %s: %w", c.Dir, err)
	}
	r.ob = ob
	close(r.watching)
	n.outboxes.mu.Lock()
	if n.outboxes.run == nil {
		n.outboxes.run = map[string]*outboxRun{}
	}
	n.outboxes.run[dir] = r
	n.outboxes.mu.Unlock()
	n.log.Info("outbox watched", slog.String("dir", dir), slog.String(logkey.To, c.To))
	return nil
}

// stop stops the watcher, then the sending goroutine. A file being
// described is abandoned; it is offered again at the next start.
func (r *outboxRun) stop() {
	r.ob.Close()
	r.cancel()
	<-r.done
}

// applyOutboxes makes the running outboxes those of cfgs: removed or
// changed ones stop, new or changed ones start.
func (n *Node) applyOutboxes(cfgs []OutboxConfig) error {
	want := map[string]OutboxConfig{}
	for _, c := range cfgs {
		dir, err := filepath.Abs(c.Dir)
		if err != nil {
			return fmt.Errorf("outbox %s: %w", c.Dir, err)
		}
		want[dir] = c
	}
	n.outboxes.mu.Lock()
	var stop []*outboxRun
	for dir, r := range n.outboxes.run {
		if c, ok := want[dir]; !ok || c != r.cfg {
			stop = append(stop, r)
			delete(n.outboxes.run, dir)
		} else {
			delete(want, dir)
		}
	}
	n.outboxes.mu.Unlock()
	for _, r := range stop {
		r.stop()
	}
	var errs []error
	for _, c := range cfgs {
		if dir, _ := filepath.Abs(c.Dir); want[dir] == c {
			errs = append(errs, n.startOutbox(c))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) stopOutboxes() {
	n.outboxes.mu.Lock()
	runs := n.outboxes.run
	n.outboxes.run = nil
	n.outboxes.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
}

// sendOutboxFile sends one file the outbox found complete. Its message id
// is recorded first, with the file's size and modification time: a crash
// after the send commits makes the next start send it again under the
// same id, and dedupe drops the copy.
//
// The file is looked at with Lstat, and read without following a link
// (see prepareFile): a symbolic link put under its name after the outbox
// found it complete is refused, and Done leaves it in the folder, as the
// outbox leaves any link.
func (n *Node) sendOutboxFile(r *outboxRun, path string) {
	if hook := n.outboxHook.Load(); hook != nil {
		(*hook)(path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return // gone meanwhile
	}
	key := outboxKey(path)
	id, err := n.outboxID(r.ctx, key, fi)
	var fin []byte
	if err == nil {
		fin, err = n.store.Meta(r.ctx, outboxFinishedKey(id))
	}
	if err == nil && fin != nil {
		// Sent (or failed) already, under this id, and left in the
		// folder because it could not be moved: only the move is tried
		// again, as the record of the send says.
		n.retryOutboxFinish(r, path, id, fin)
		return
	}
	if err == nil {
		err = n.store.SetMeta(r.ctx, outboxSentKey(id), outboxSentRecord(path, r.cfg.After, filetransfer.FileIDOf(fi)))
	}
	if err != nil {
		n.log.Warn("outbox file not sent", slog.String(logkey.Path, path), slog.Any(logkey.Error, err))
		return
	}
	m := n.Producer().CreateFileMessage(r.cfg.To)
	m.ID = id
	m.File.SendFilePath = path
	err = n.sendFile(r.ctx, m, true)
	if r.ctx.Err() != nil {
		return
	}
	if err != nil || m.File.ReceivedFilePath != "" {
		// Failed, or delivered here already: no sender will report it.
		n.finishOutboxFile(r.ob, path, filetransfer.FileIDOf(fi), id, r.cfg.After, err)
	}
}

// outboxID returns the id recorded for the outbox file, or records a new
// one. A record for another version of the file (size or time differ) is
// replaced.
func (n *Node) outboxID(ctx context.Context, key string, fi os.FileInfo) (uint64, error) {
	rec, err := n.store.Meta(ctx, key)
	if err != nil {
		return 0, err
	}
	size, mtime := uint64(fi.Size()), uint64(fi.ModTime().UnixNano())
	if len(rec) == 24 && binary.BigEndian.Uint64(rec[8:]) == size && binary.BigEndian.Uint64(rec[16:]) == mtime {
		return binary.BigEndian.Uint64(rec), nil
	}
	id, err := n.ids.Next()
	if err != nil {
		return 0, err
	}
	rec = binary.BigEndian.AppendUint64(nil, id)
	rec = binary.BigEndian.AppendUint64(rec, size)
	rec = binary.BigEndian.AppendUint64(rec, mtime)
	return id, n.store.SetMeta(ctx, key, rec)
}

// retryOutboxFinish moves a file that was sent, or failed, under id
// before, but could not leave the folder then (fin is its
// outboxFinishedKey record), without sending it again.
func (n *Node) retryOutboxFinish(r *outboxRun, path string, id uint64, fin []byte) {
	rec, err := n.store.Meta(r.ctx, outboxSentKey(id))
	if err != nil {
		n.log.Warn("outbox: cannot read which file a message was sent for", slog.Uint64("msg_id", id), slog.Any(logkey.Error, err))
		return
	}
	_, after, sent, known := parseOutboxSent(rec)
	if !known {
		after = r.cfg.After
	}
	n.log.Info("outbox: the file was sent already; moving it out of the folder again, not sending it",
		slog.String(logkey.Path, path), slog.Uint64("msg_id", id))
	n.finishOutboxFile(r.ob, path, sent, id, after, parseOutboxFinished(fin))
}

// finishOutboxFile moves the file to sent/ or failed/ (or deletes it, as
// after says) if it is still the version sent, and forgets its id, both
// ways. ob is the outbox watching its folder, nil if none does any more.
//
// A file that cannot be moved (the folder became read-only, say) keeps
// its records, marked finished (outboxFinishedKey): left in the folder
// and offered again (by the outbox after a wait, or at the next start),
// it keeps its id, and is then moved, not sent a second time. Forgetting the id would make it a new
// file, with a new id that dedupe does not know.
func (n *Node) finishOutboxFile(ob *filetransfer.Outbox, path string, sent filetransfer.FileID, id uint64, after string, err error) {
	var derr error
	if ob != nil {
		derr = ob.Done(path, sent, err, after)
	} else {
		derr = filetransfer.FinishOutboxFile(filetransfer.OutboxConfig{Dir: filepath.Dir(path), Logger: n.cfg.Logger}, path, sent, err, after)
	}
	ctx := context.Background()
	if _, lerr := os.Lstat(path); derr != nil && errors.Is(lerr, fs.ErrNotExist) {
		derr = nil // taken away meanwhile: nothing is left to send again
	}
	if derr != nil {
		n.log.Error("outbox: cannot move the file out of the folder; it stays there, and is not sent again: the move is tried again later (petrel_outbox_stuck_files), and at the next start",
			slog.String(logkey.Path, path), slog.Uint64("msg_id", id), slog.Any(logkey.Error, derr))
		if serr := n.store.SetMeta(ctx, outboxFinishedKey(id), outboxFinishedRecord(err)); serr != nil {
			n.log.Warn("outbox: cannot record that the file was finished", slog.String(logkey.Path, path), slog.Any(logkey.Error, serr))
		}
		return
	}
	for _, key := range []string{outboxKey(path), outboxSentKey(id), outboxFinishedKey(id)} {
		if serr := n.store.SetMeta(ctx, key, nil); serr != nil {
			n.log.Warn("outbox: cannot forget the file's id", slog.String(logkey.Path, path), slog.Any(logkey.Error, serr))
		}
	}
}

// outboxDone is the end of a file message the sender reports: if this
// node sent it from an outbox, by the node's own record of which file it
// sent under that id, the file leaves the folder. The message's own
// sendFilePath plays no part.
func (n *Node) outboxDone(m *message.Message, err error) {
	if m.Origin != n.id {
		return // not sent from here, so from no outbox of this node
	}
	rec, merr := n.store.Meta(context.Background(), outboxSentKey(m.ID))
	if merr != nil {
		n.log.Warn("outbox: cannot read which file a message was sent for", slog.Uint64("msg_id", m.ID), slog.Any(logkey.Error, merr))
		return
	}
	if rec == nil {
		return
	}
	path, after, sent, known := parseOutboxSent(rec)
	n.outboxes.mu.Lock()
	r := n.outboxes.run[filepath.Dir(path)]
	n.outboxes.mu.Unlock()
	var ob *filetransfer.Outbox
	if r != nil {
		ob = r.ob
		if !known {
			after = r.cfg.After
		}
	}
	// With no outbox on the folder any more (removed by a reload, or
	// not configured at this start), the file still leaves it: it was
	// sent, and left there it would be sent again once an outbox watches
	// the folder.
	n.finishOutboxFile(ob, path, sent, m.ID, after, err)
}

// OutboxStatus is one outbox folder, for `petrel stat`.
type OutboxStatus struct {
	Dir string `json:"dir"` // absolute
	To  string `json:"to"`
	// Watching is false while the folder is removed or renamed away: its
	// files are not sent until it is back under its path, which the
	// outbox looks for (petrel_outbox_watching).
	Watching bool `json:"watching"`
}

// outboxStatus lists the outboxes, by folder.
func (n *Node) outboxStatus() []OutboxStatus {
	n.outboxes.mu.Lock()
	out := make([]OutboxStatus, 0, len(n.outboxes.run))
	for dir, r := range n.outboxes.run {
		out = append(out, OutboxStatus{Dir: dir, To: r.cfg.To, Watching: r.ob.Watching()})
	}
	n.outboxes.mu.Unlock()
	slices.SortFunc(out, func(a, b OutboxStatus) int { return strings.Compare(a.Dir, b.Dir) })
	return out
}
