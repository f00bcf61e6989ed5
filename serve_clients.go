package petrel

import (
	"context"
	"errors"
	"fmt"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/session"
)

// The node's side of remote clients (see Dial for the client's): the
// receiver hands it the messages clients publish and the addresses they
// subscribe to.

// clientPublish routes a client's publish for the router. A message a
// client publishes goes where the node's own Producer would send it, once the
// access rules let the client do so: send, for an address of this node;
// relay, for an address on another node, which this node forwards on the
// client's behalf. A file message is refused: its file is on the client's
// machine, and the node must never read a path a client names.
func (n *Node) clientPublish(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, string, error) {
	action, err := n.actionFor(m.Destination)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", receiver.ErrRefused, err)
	}
	if err := n.authorizeInbound(peer.Name, action, m.Destination); err != nil {
		return nil, "", fmt.Errorf("%w: %w", receiver.ErrDenied, err)
	}
	if m.Kind == message.KindFile {
		return nil, "", fmt.Errorf("%w: node %s takes no file messages from clients", receiver.ErrRefused, n.cfg.Name)
	}
	q, dest, err := n.route(ctx, m.Destination)
	if err != nil {
		return nil, "", clientRefusal(err)
	}
	return q, dest, nil
}

// clientSubscribe finds for the router the receive queue of addr, as
// Node.Consumer finds it, once the access rules let the client consume
// from it.
func (n *Node) clientSubscribe(ctx context.Context, peer session.Peer, addr string) (*queue.Queue, error) {
	if err := n.Authorize(peer.Name, ActionConsume, addr); err != nil {
		return nil, fmt.Errorf("%w: %w", receiver.ErrDenied, err)
	}
	q, err := n.consumerQueue(addr)
	if err != nil {
		return nil, clientRefusal(err)
	}
	if err := n.subscribeClient(ctx, peer, q.Name()); err != nil {
		return nil, err
	}
	return q, nil
}

// clientRefusal marks the errors that will not go away by trying again as
// refusals for good; the others (a store closing or failing) end the
// client's session, and its client tries again.
func clientRefusal(err error) error {
	for _, permanent := range []error{message.ErrDestination, ErrNotReceive, ErrUnknownAddress, ErrNoRoute} {
		if errors.Is(err, permanent) {
			return fmt.Errorf("%w: %w", receiver.ErrRefused, err)
		}
	}
	return err
}
