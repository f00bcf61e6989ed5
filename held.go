package petrel

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/receiver"
)

// Nothing from the wire names a path on this node. A relay holds the file
// it forwards at a path it derives from the file message's (origin, id),
// never from a property of the message: the sender reads only that path
// for a file this node did not create, and the cleanup removes only that
// folder, once it is sure it lies inside the held root.

// ErrForeignPath is returned (wrapped) when a file message asks this node
// to read or remove a path the node did not give it: a relayed file whose
// sendFilePath is not its held copy. The message fails for good.
var ErrForeignPath = errors.New("path not given by this node")

// heldDir is the folder in which this node holds the relayed file of the
// file message (origin, id): <spool>/held/<transfer id>. The transfer id
// is hex and digits; Within proves the folder stays in the held root all
// the same.
func (n *Node) heldDir(origin message.NodeID, id uint64) (string, error) {
	tid := receiver.TransferID(origin, id)
	if err := filetransfer.CheckID(tid); err != nil {
		return "", fmt.Errorf("held copy of message %d: %w", id, err)
	}
	return filetransfer.Within(n.heldRoot(), filepath.Join(n.heldRoot(), tid))
}

// fileSource is the sender's Source: the path the content of m is read
// from. A file this node created is read where its producer named it;
// any other is this node's held copy, so its sendFilePath must lie
// directly in the held folder derived for (origin, id). Anything else is
// refused for good, never read.
func (n *Node) fileSource(m *message.Message) (string, error) {
	if m.Origin == n.id {
		return m.File.SendFilePath, nil
	}
	dir, err := n.heldDir(m.Origin, m.ID)
	if err != nil {
		n.access.pathsRefused.Add(1)
		return "", fmt.Errorf("file %q from %s: %w: %w", m.File.Filename, m.Origin, ErrForeignPath, err)
	}
	path := m.File.SendFilePath
	if path == "" || filepath.Clean(path) != path || filepath.Dir(path) != dir {
		n.access.pathsRefused.Add(1)
		return "", fmt.Errorf("file %q from %s: node %s relays a file only from its held copy in %s, and the message names %q: %w",
			m.File.Filename, m.Origin, n.cfg.Name, dir, path, ErrForeignPath)
	}
	// Sent again (a dead letter replayed): the copy is in use, and the
	// janitor must not take it away mid-transfer.
	n.heldMu.Lock()
	defer n.heldMu.Unlock()
	if err := removeIfExists(dir + failedSuffix); err != nil {
		n.log.Warn("held copy: cannot remove its failed mark", slog.String(logkey.Path, dir), slog.Any(logkey.Error, err))
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("file %q from %s: node %s no longer holds its copy (a copy that failed for good is kept for files.abandon_after, %v): %w",
			m.File.Filename, m.Origin, n.cfg.Name, n.files.AbandonAfter, errHeldGone)
	}
	return path, nil
}

// errHeldGone is returned (wrapped) when a relayed file message is sent
// again after the relay's copy of its file was removed: a dead letter
// replayed after files.abandon_after. The message fails for good.
var errHeldGone = errors.New("the relay's copy of the file is gone")

// failedSuffix names the mark beside a held folder whose file failed for
// good: <spool>/held/<transfer id>.failed. Its modification time is
// when; the janitor removes the folder and the mark files.abandon_after
// later, unless the file is sent again first.
const failedSuffix = ".failed"

// keepFailedHeld keeps the held copy of the relayed file message m, which
// failed for good: its dead letter is then the only whole copy, and
// petrel dlq replay sends it from there. The mark starts its time.
func (n *Node) keepFailedHeld(m *message.Message) {
	dir, err := n.heldDir(m.Origin, m.ID)
	if err != nil {
		n.dropHeld(m) // logs and counts the refusal
		return
	}
	if _, err := os.Stat(dir); err != nil {
		return // nothing held: a file this node never took whole
	}
	n.heldMu.Lock()
	defer n.heldMu.Unlock()
	if err := os.WriteFile(dir+failedSuffix, nil, 0o600); err != nil {
		// Unmarked, the copy would be kept for ever: drop it instead.
		n.log.Warn("held copy of a failed file not kept: cannot mark it", slog.String(logkey.Path, dir), slog.Any(logkey.Error, err))
		n.dropHeldLocked(dir)
	}
}

// dropFailedHeld removes the held copies that failed for good longer
// than files.abandon_after ago and were not sent again since. It runs
// with dropAbandoned.
func (n *Node) dropFailedHeld() {
	entries, err := os.ReadDir(n.heldRoot())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			n.log.Warn("list the held files", slog.Any(logkey.Error, err))
		}
		return
	}
	n.heldMu.Lock()
	defer n.heldMu.Unlock()
	for _, e := range entries {
		tid, ok := strings.CutSuffix(e.Name(), failedSuffix)
		if !ok || e.IsDir() || filetransfer.CheckID(tid) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < n.files.AbandonAfter {
			continue
		}
		dir := filepath.Join(n.heldRoot(), tid)
		n.dropHeldLocked(dir)
		n.log.Info("dropped the held copy of a file that failed for good", slog.String(logkey.ID, tid),
			slog.Duration("abandon_after", n.files.AbandonAfter))
	}
}

// dropHeld removes the held copy of the relayed file message m, if there
// is one: the folder derived for (origin, id), checked against the held
// root.
func (n *Node) dropHeld(m *message.Message) {
	dir, err := n.heldDir(m.Origin, m.ID)
	if err != nil {
		n.access.pathsRefused.Add(1)
		n.log.Warn("held copy not removed: its folder would not be inside the held folder", slog.Any(logkey.Error, err))
		return
	}
	n.heldMu.Lock()
	defer n.heldMu.Unlock()
	n.dropHeldLocked(dir)
}

// dropHeldLocked removes the held folder dir and its failed mark, with
// heldMu held.
func (n *Node) dropHeldLocked(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		n.log.Warn("remove a forwarded file", slog.String(logkey.Path, dir), slog.Any(logkey.Error, err))
		return
	}
	if err := removeIfExists(dir + failedSuffix); err != nil {
		n.log.Warn("remove a held file's failed mark", slog.String(logkey.Path, dir), slog.Any(logkey.Error, err))
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
