package petrel

import (
	"errors"
	"fmt"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
)

// Defaults of the node's resource bounds; see the README's "Bounded
// resources" for the full table.
const (
	// DefaultMaxAutoQueues is the default of Config.MaxAutoQueues.
	DefaultMaxAutoQueues = 10000
	// DefaultMaxSpoolBytes is the default of FilesConfig.MaxSpoolBytes;
	// a peer's share defaults to half of it.
	DefaultMaxSpoolBytes = 64 << 30
)

// ErrTooManyQueues is returned when creating an undeclared address would
// take the node past Config.MaxAutoQueues. A peer's message gets it as a
// refusal for good (it wraps receiver.ErrRefused too); declare the
// address, or raise max_auto_queues.
var ErrTooManyQueues = errors.New("too many auto-created queues")

// spoolQuota is the files configuration's quota, with its defaults.
func (n *Node) spoolQuota() filetransfer.Quota {
	q := filetransfer.Quota{Max: n.cfg.Files.MaxSpoolBytes, PerPeer: n.cfg.Files.MaxSpoolBytesPerPeer}
	if q.Max <= 0 {
		q.Max = DefaultMaxSpoolBytes
	}
	if q.PerPeer <= 0 {
		q.PerPeer = q.Max / 2
	}
	return q
}

// maxAutoQueues is Config.MaxAutoQueues with its default.
func (n *Node) maxAutoQueues() int {
	if m := n.cfg.MaxAutoQueues; m > 0 {
		return m
	}
	return DefaultMaxAutoQueues
}

// autoCreateRoom returns nil when one more undeclared receive queue, name,
// may be created; n.autoMu is held. Undeclared queues are counted from the
// store, so a queue removed or declared since gives its room back. This
// runs only when a queue is about to be created, never per message to a
// queue that exists.
func (n *Node) autoCreateRoom(name string) error {
	limit := n.maxAutoQueues()
	n.mu.Lock()
	count := 0
	for _, q := range n.store.Queues() {
		if _, declared := n.addresses[q.Name()]; !declared && q.Kind() == queue.KindReceive {
			count++
		}
	}
	n.mu.Unlock()
	if count < limit {
		return nil
	}
	n.autoRefused.Add(1)
	return fmt.Errorf("%w: %w: address %q is not declared on node %s, which holds %d undeclared queues already (max_auto_queues); declare it or raise the limit",
		receiver.ErrRefused, ErrTooManyQueues, name, n.cfg.Name, count)
}
