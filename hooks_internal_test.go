package petrel

import "github.com/petrelmq/petrel/message"

// SetHashHook makes f run in every Send of n that hashes a file whose
// checksum follows, after the file message is stored and before the file
// is read: a test changes the file there, or holds the hash back, without
// sleeping for a race to happen.
func SetHashHook(n *Node, f func(m *message.Message)) { n.hashHook = f }

// PendingChecksums returns how many file checksums n's senders may still
// wait for.
func PendingChecksums(n *Node) int { return n.checksums.Len() }
