package petrel

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

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
	return path, nil
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
	if err := os.RemoveAll(dir); err != nil {
		n.log.Warn("remove a forwarded file", slog.String(logkey.Path, dir), slog.Any(logkey.Error, err))
	}
}
