package petrel

import (
	"errors"

	"github.com/petrelmq/petrel/queue"
)

var (
	// ErrNoRoute is returned by Send when the destination is another node
	// that this node has no way to reach.
	ErrNoRoute = errors.New("no route to destination")
	// ErrUnknownAddress is returned by Send and Consumer for a local address
	// that is not declared while auto-creation is off.
	ErrUnknownAddress = errors.New("unknown address")
	// ErrNotReceive is returned by Consumer for an address this node does
	// not receive.
	ErrNotReceive = errors.New("address is not a receive address on this node")
	// ErrNoMessage is returned by Poll when no message is ready now.
	ErrNoMessage = queue.ErrNoMessage
	// ErrStoreFull is returned by Send when the store is past its limits or
	// the disk is full, and by a remote client's Send when the node's is.
	// Nothing was stored; retry once space is freed (the node's dedupe
	// stores a remote client's message sent again once).
	ErrStoreFull = queue.ErrStoreFull
	// ErrClosed is returned by every call on a closed Node.
	ErrClosed = queue.ErrClosed
	// ErrLeaseLost is returned by Ack and Nack when the lease timed out and
	// the message went back to its queue.
	ErrLeaseLost = queue.ErrLeaseLost
	// ErrInUse is returned by Open for a data directory that another node
	// has open, in this process or another: one node per data directory.
	ErrInUse = queue.ErrInUse
)

// ErrDenied is wrapped by an access-rule denial; see Node.Authorize.
var ErrDenied = errors.New("access denied")
