package petrel

import (
	"context"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
)

// SetHashHook makes f run in every Send of n that hashes a file whose
// checksum follows, after the file message is stored and before the file
// is read: a test changes the file there, or holds the hash back, without
// sleeping for a race to happen.
func SetHashHook(n *Node, f func(m *message.Message)) { n.hashHook = f }

// SetOutboxHook makes f run for each file an outbox of n is about to
// send, after the file was found complete, before the node looks at it
// or reads it: a test swaps the file for something else there, as a race would.
func SetOutboxHook(n *Node, f func(path string)) { n.outboxHook.Store(&f) }

// PendingChecksums returns how many file checksums n's senders may still
// wait for.
func PendingChecksums(n *Node) int { return n.checksums.Len() }

// FilesAnnounced returns how many file sessions announced a file to n's
// receiver, resumes included.
func FilesAnnounced(n *Node) int64 { return n.srv.StatsRef().FilesAnnounced.Load() }

// FileState returns where the file message id sent from n stands, and the
// error of a failed one; "" and why for an id n knows nothing of.
func FileState(n *Node, id uint64) (filetransfer.State, string) {
	p, ok, err := n.fileProgress(context.Background(), id)
	switch {
	case err != nil:
		return "", err.Error()
	case !ok:
		return "", "unknown file message"
	}
	return p.State, p.Error
}

// SetMaxExtraConns sets the connections a client opens past its first,
// until restore.
func SetMaxExtraConns(n int) (restore func()) {
	old := maxExtraConns
	maxExtraConns = n
	return func() { maxExtraConns = old }
}

// ClientConns counts a client's live connections.
func ClientConns(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, conn := range append(c.extras, c.conn) {
		if conn != nil && conn.Err() == nil {
			n++
		}
	}
	return n
}

// SetIdleConnCheck sets how often a client checks its connections past
// the first for sessions, until restore.
func SetIdleConnCheck(d time.Duration) (restore func()) {
	old := idleConnCheck
	idleConnCheck = d
	return func() { idleConnCheck = old }
}
