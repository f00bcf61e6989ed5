package petrel

import (
	"context"
	"fmt"
	"strings"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/sender"
)

// Producer makes messages and sends them. It is cheap, and safe for
// concurrent use: one producer may keep thousands of sends in flight.
type Producer struct {
	b publishBackend
}

// Producer returns a producer for this node.
func (n *Node) Producer() *Producer { return &Producer{b: &nodePublisher{stamper: n.stamper(), n: n}} }

// CreateCommandMessage returns a command message for addr with its header
// set: id, origin, destination, kind, default priority and timestamp.
func (p *Producer) CreateCommandMessage(addr string) *message.Message {
	return p.b.create(addr, message.KindCommand)
}

// CreateDataMessage returns a data message for addr with its header set.
func (p *Producer) CreateDataMessage(addr string) *message.Message {
	return p.b.create(addr, message.KindData)
}

// CreateFileMessage returns a file message for addr with its header set.
// Set File.SendFilePath to the file to send; Send fills in the rest of the
// file properties (filename, unless set, filesize, fileChecksum, unless
// set, and the identifiers).
func (p *Producer) CreateFileMessage(addr string) *message.Message {
	return p.b.create(addr, message.KindFile)
}

// Send stores m durably and returns once it is committed: with sync full,
// fsynced. A message for an address this node receives goes straight to
// its receive queue. If ctx ends first, Send returns ctx's error and the
// message may or may not have been stored.
//
// For a file message, Send describes the file (name, size, SHA-256) and
// stores the file message: from then on the transfer is the node's,
// tracked in its store, and resumes after link cuts and restarts. When
// File.FileChecksum is already set, it is taken as the file's SHA-256 in
// lowercase hex and the file is not read; a wrong one makes the next hop
// refuse the file as corrupt. Otherwise Send reads the whole file for its
// SHA-256; for a file that leaves this node, it stores the message first
// (the checksum follows the content on the wire), so that the transfer
// starts while Send still reads, and returns once it has the checksum.
// Either way Send returns with File.FileChecksum set. If the file cannot
// be hashed (it changes meanwhile, or ctx ends), Send returns the error
// and the file is delivered nowhere: its transfer is given up at once,
// as a failed one (see FilesConfig and PropNotify). That it was given up
// is recorded in the store, so that it holds across a restart of the node
// before its sender acted on it (its link was down, say). The file must
// not change until it is sent; if it does, the transfer fails with the
// reason. A file for an address of this node is read first, then copied
// into its received folder before Send returns.
//
// A destination whose name starts with the word "_petrel" is the node's
// own traffic, on this node or another: Send refuses it, wrapping
// message.ErrDestination.
//
// Through a Client (see Dial), Send returns once the node has committed
// the message, and a refusal by the node wraps ErrRefused or ErrDenied. A
// client cannot send file messages.
func (p *Producer) Send(ctx context.Context, m *message.Message) error {
	return p.b.send(ctx, m)
}

// SendAsync submits m and returns at once with a handle that completes
// when m is durable or failed. Submission blocks only while the store's
// commit queue is full (back-pressure).
//
// A file message is described and stored before SendAsync returns, as by
// Send: reading the file is the slow part, and it cannot be done later.
//
// Through a Client, SendAsync blocks while DialOptions.Window sends are in
// flight, and the handle completes when the node confirms the message.
func (p *Producer) SendAsync(m *message.Message) *Pending {
	return p.b.sendAsync(m)
}

// sendFile describes m's file, stores m and returns once it is durable.
// With dedupe, a send of the same (origin, id) that was stored already is
// a no-op: an outbox sends again what a crash may have interrupted.
func (n *Node) sendFile(ctx context.Context, m *message.Message, dedupe bool) error {
	resends := dedupe // the caller (an outbox) sends the file again after a restart
	if err := n.reservedDest(m.Destination); err != nil {
		return err
	}
	if err := checkNotify(m); err != nil {
		return err
	}
	if err := n.stamper().stamp(m); err != nil {
		return err
	}
	if n.localTopic(m.Destination) != "" {
		return fmt.Errorf("send file to %q: %w; send it to an address", m.Destination, ErrFileToTopic)
	}
	if err := n.icpt.publishLocal(ctx, m); err != nil {
		return err
	}
	q, dest, err := n.route(ctx, m.Destination)
	if err != nil {
		return err
	}
	// A file that leaves this node is stored before it is hashed, so that
	// its transfer starts at once; the hash follows, here (see Send).
	later := q.Kind() == queue.KindSend && m.File.FileChecksum == ""
	if err := n.prepareFile(ctx, m, dest, later, !resends); err != nil {
		return err
	}
	var hashed func(sum string, err error)
	if m.File.FileChecksum == "" {
		// Registered before the message is stored, so that the sender
		// that picks it up waits for this hash rather than doing its own.
		hashed = n.checksums.Begin(m.Origin, m.ID)
	}
	m.Destination = dest
	if err := m.Validate(n.cfg.Limits); err != nil {
		return fmt.Errorf("send file to %q: %w", m.Destination, err)
	}
	var local *filetransfer.Incoming
	if q.Kind() == queue.KindReceive {
		if local, err = n.deliverLocal(ctx, m, q); err != nil {
			return err
		}
		dedupe = true // the copy may be done again after a crash; the message must not
	}
	op, err := n.store.Submit([]queue.Put{{Queue: q, Msg: m, Dedupe: dedupe}})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		if local != nil {
			local.Close()
		}
		switch {
		case hashed == nil:
		case op != nil && ctx.Err() != nil:
			// The message may be stored all the same (ctx ended while its
			// commit ran): its sender must give it up, not guess.
			n.hashFailed(ctx, m, err, hashed, resends)
		default:
			n.checksums.Drop(m.Origin, m.ID) // never stored: no sender settles it
		}
		return fmt.Errorf("send file to %q: %w", m.Destination, err)
	}
	if hashed != nil {
		if err := n.hashFollowing(ctx, m, hashed, resends); err != nil {
			return err
		}
	}
	if local != nil {
		local.Finish()
		n.recordOutcome(m, filetransfer.StateDelivered, nil)
		n.notifyFile(m, nil)
	}
	return nil
}

// route returns the queue a message for dest goes to, and dest in full
// when it leaves this node. A bare name is local unless it is declared as
// a send address, which names its node.
func (n *Node) route(ctx context.Context, dest string) (*queue.Queue, string, error) {
	name, node, err := n.resolve(dest)
	if err != nil {
		return nil, "", fmt.Errorf("send: %w", err)
	}
	if (node == "" || node == n.cfg.Name) && n.topics.isTopic(name) {
		q, err := n.inbox(ctx) // a client's publish to a topic
		return q, dest, err
	}
	if node == "" || node == n.cfg.Name {
		q, err := n.receiveQueue(ctx, name)
		return q, dest, err
	}
	q, err := n.sendQueue(ctx, name, node)
	return q, message.JoinDestination(name, node), err
}

// reservedDest refuses a destination whose name is reserved for the
// node's internal traffic (reservedName), on this node or another: what a
// producer or a client sends to "_petrel.topics@b" would reach b as this
// node's interest. Only what comes from outside the node is judged here;
// the node's own traffic goes straight to its send queues (sendQueue), and
// a replay of its dead letters through route.
func (n *Node) reservedDest(dest string) error {
	if !strings.HasPrefix(dest, internalWord) {
		return nil // every send takes this path: no second parse of its destination
	}
	name, _, err := message.ParseDestination(dest)
	if err != nil {
		return nil // refused, saying why, where it is routed
	}
	if err := reservedName(name); err != nil {
		return fmt.Errorf("send to %q: %w", dest, err)
	}
	return nil
}

// resolve splits dest into its name and node. A bare name declared as a
// send address names its node; any other bare name is this node's ("").
func (n *Node) resolve(dest string) (name, node string, err error) {
	name, node, err = message.ParseDestination(dest)
	if err != nil || node != "" {
		return name, node, err
	}
	n.mu.Lock()
	a, declared := n.addresses[name]
	n.mu.Unlock()
	if declared && a.Role == address.RoleSend {
		node = a.Node
	}
	return name, node, nil
}

// Pending is the completion handle of SendAsync.
type Pending struct {
	c completion
}

// Done is closed once the message is durable or the send failed.
func (p *Pending) Done() <-chan struct{} { return p.c.Done() }

// Err returns the send's error once Done is closed; nil before and on
// success.
func (p *Pending) Err() error { return p.c.Err() }

// Wait blocks until the send completes or ctx ends.
func (p *Pending) Wait(ctx context.Context) error { return p.c.Wait(ctx) }

// hashFollowing computes the SHA-256 of m's file, stored with its checksum
// to follow, while its sender may already be sending it, and hands the
// result to that sender through hashed. The file must still have the size
// and modification time it was described with. On success m carries the
// checksum, as a caller of Send expects; on failure the sender gives the
// file up (aborting its transfer, settling the message as failed), so
// that it is delivered nowhere, and the error is Send's.
func (n *Node) hashFollowing(ctx context.Context, m *message.Message, hashed func(string, error), resends bool) error {
	want := filetransfer.InfoFromProps(m.File)
	want.ModTime = modTimeOf(m)
	if hook := n.hashHook; hook != nil {
		hook(m)
	}
	info, err := filetransfer.DescribeMatching(ctx, m.File.SendFilePath, want)
	if err != nil {
		n.hashFailed(ctx, m, err, hashed, resends)
		return fmt.Errorf("send file: %w", err)
	}
	hashed(info.SHA256, nil)
	m.File.FileChecksum = info.SHA256
	return nil
}

// hashFailed tells m's sender that Send's hash ended with err, which
// gives the file up (giveUpHash), unless the caller sends the file again
// after a restart (resends: an outbox) and err is only ctx ending, as it
// does when the node stops: that says nothing of the file, whose sender
// then hashes it itself.
func (n *Node) hashFailed(ctx context.Context, m *message.Message, err error, hashed func(string, error), resends bool) {
	if resends && ctx.Err() != nil {
		hashed("", sender.ErrNotHashed)
		return
	}
	n.giveUpHash(m, err, hashed)
}
