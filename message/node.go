package message

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// NodeID is a node's unique id: 128 random bits made at the node's first
// start and kept in its data directory. Unlike the node's name, which an
// operator may reuse or rename, the id never changes, so it is what message
// Origin and deduplication rely on.
type NodeID [16]byte

// NewNodeID returns a fresh random NodeID from crypto/rand. With 122+ random
// bits, two nodes picking the same id is not a practical concern.
func NewNodeID() (NodeID, error) {
	var id NodeID
	if _, err := rand.Read(id[:]); err != nil {
		return NodeID{}, fmt.Errorf("new node id: %w", err)
	}
	return id, nil
}

// ParseNodeID reads the 32 hex digits that String writes. Upper and lower
// case are both accepted so that ids copied from other tools work.
func ParseNodeID(s string) (NodeID, error) {
	var id NodeID
	if len(s) != 2*len(id) {
		return NodeID{}, fmt.Errorf("node id %s: has %d characters, want %d hex digits: %w",
			clip(s), len(s), 2*len(id), ErrNodeID)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return NodeID{}, fmt.Errorf("node id %s: want %d hex digits: %w", clip(s), 2*len(id), ErrNodeID)
	}
	return id, nil
}

// String returns the id as 32 lowercase hex digits.
func (id NodeID) String() string {
	return hex.EncodeToString(id[:])
}

// IsZero reports whether id is the zero id, which no node ever uses: it marks
// an id that was never set.
func (id NodeID) IsZero() bool {
	return id == NodeID{}
}

// clip quotes s for an error message, cut short so that hostile or mistaken
// input of any size gives a readable error.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
