package petrel

import (
	"context"
	"errors"
	"fmt"

	"github.com/petrelmq/petrel/address"
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
	if err := n.reservedDest(m.Destination); err != nil {
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
	if q.Name() == topicInbox {
		// Stored naming this node, so that the inbox pump never takes it
		// for a copy a neighbour forwarded (addressed to the topic alone),
		// whose petrel.hops a node wrote: a client's counts for nothing
		// (nodeHops).
		name, _, _ := message.ParseDestination(dest)
		dest = message.JoinDestination(name, n.cfg.Name)
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

// clientSubscribeTopic makes or joins for the router the topic
// subscription sub of pattern, as Node.Subscribe does, once the access
// rules let the client consume from the pattern (the pattern is checked as
// an address name: a consume rule "orders.*" or "*" covers "orders.#").
// It returns the subscription's queue and its release, which closes the
// subscription's consumer: a non-durable subscription ends with the last
// session on it. The interceptors see the subscription as the client's
// (OnSubscribe here, OnDeliver, OnAck and OnUnsubscribe in the receiver),
// not as the node's own consumer.
func (n *Node) clientSubscribeTopic(ctx context.Context, peer session.Peer, pattern string, sub session.TopicSubscription) (*queue.Queue, func(), error) {
	if err := n.authorizeSubscribe(peer.Name, pattern); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", receiver.ErrDenied, err)
	}
	// The subscription is the client's identity's: another identity may
	// not join it, and it counts against max_subscriptions_per_identity.
	c, err := n.subscribe(ctx, pattern, SubscribeOptions{Name: sub.Name, Durable: sub.Durable}, subscriber{identity: peer.Name, client: true, remote: true})
	if err != nil {
		return nil, nil, clientRefusal(err)
	}
	release := func() { _ = c.Close() }
	sc, ok := c.b.(*subConsumer)
	if !ok {
		release()
		return nil, nil, fmt.Errorf("subscribe to %q: the subscription has no queue of its own", pattern)
	}
	if err := n.subscribeClient(ctx, peer, sc.q.Name()); err != nil {
		release()
		return nil, nil, err
	}
	return sc.q, release, nil
}

// rejudgeSessions has the receiver judge again, under the identities and
// access rules just swapped in, what its peers hold open: a client's
// subscription that lost its consume or subscribe right ends with the
// reason, and the connections of an identity removed from peers, or
// granted less (its kind, relay, pinned id), or that proved a secret no
// longer in force (its own, or the shared one), are closed; the MQTT
// gateway judges its clients the same way. Reconfigure calls it after each change;
// deliveries themselves never look at the rules.
func (n *Node) rejudgeSessions() {
	if n.srv != nil {
		n.srv.Rejudge()
	}
	if n.mqtt != nil {
		n.mqtt.Rejudge()
	}
}

// subscriptionRevoked judges again the subscription of addr (a topic
// pattern if topic) that the client peer holds, as clientSubscribe or
// clientSubscribeTopic judged it when it opened.
func (n *Node) subscriptionRevoked(peer session.Peer, addr string, topic bool) error {
	if topic {
		return n.authorizeSubscribe(peer.Name, addr)
	}
	return n.Authorize(peer.Name, ActionConsume, addr)
}

// clientRefusal marks the errors that will not go away by trying again as
// refusals for good; the others (a store closing or failing) end the
// client's session, and its client tries again.
func clientRefusal(err error) error {
	for _, permanent := range []error{message.ErrDestination, ErrNotReceive, ErrUnknownAddress, ErrNoRoute,
		ErrNoTopicSpace, ErrSubscription, address.ErrTopicPattern} {
		if errors.Is(err, permanent) {
			return fmt.Errorf("%w: %w", receiver.ErrRefused, err)
		}
	}
	return err
}
