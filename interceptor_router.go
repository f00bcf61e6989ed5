package petrel

import (
	"context"
	"fmt"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/session"
)

// The router hands the receiver's connections, messages and deliveries
// to the node's interceptors (see receiver.Interceptor). The receiver asks
// Intercepting once: a node without interceptors decodes nothing more.

var _ receiver.Interceptor = router{}

// Intercepting implements receiver.Interceptor.
func (r router) Intercepting() bool { return r.n.icpt.on() }

// Connected implements receiver.Interceptor: OnConnect.
func (r router) Connected(ctx context.Context, peer session.Peer) error {
	return r.n.icpt.connect(ctx, connOf(peer, pathOfConn(peer)))
}

// Disconnected implements receiver.Interceptor: OnDisconnect.
func (r router) Disconnected(peer session.Peer) {
	r.n.icpt.disconnect(connOf(peer, pathOfConn(peer)))
}

// Publish implements receiver.Interceptor: OnPublish for a link's or a
// client's message.
func (r router) Publish(ctx context.Context, peer session.Peer, m *message.Message, client bool) error {
	path := PathLink
	if client {
		path = PathClient
	}
	return r.n.icpt.publish(ctx, m, connOf(peer, path))
}

// Deliver implements receiver.Interceptor: OnDeliver for a client's
// subscription.
func (r router) Deliver(ctx context.Context, peer session.Peer, addr string, m *message.Message) {
	r.n.icpt.deliver(ctx, m, connOf(peer, PathClient))
}

// Settled implements receiver.Interceptor: OnAck for a client's settle.
func (r router) Settled(peer session.Peer, addr string, m *message.Message, op session.SettleOp, reason string) {
	a := AckInfo{Address: addr, ID: m.ID, Origin: m.Origin, Conn: connOf(peer, PathClient), Reason: reason}
	switch op {
	case session.SettleNack:
		a.Nack = true
	case session.SettleReject:
		a.Nack, a.Reason = true, "rejected: "+reason
	}
	r.n.icpt.ack(a)
}

// Unsubscribed implements receiver.Interceptor: OnUnsubscribe for a
// client's subscription.
func (r router) Unsubscribed(peer session.Peer, addr string) {
	r.n.icpt.unsubscribe(SubscribeInfo{Address: addr, Conn: connOf(peer, PathClient)})
}

// subscribeClient runs OnSubscribe for a client's subscription of addr; a
// refusal is a refusal for good.
func (n *Node) subscribeClient(ctx context.Context, peer session.Peer, addr string) error {
	if err := n.icpt.subscribe(ctx, SubscribeInfo{Address: addr, Conn: connOf(peer, PathClient)}); err != nil {
		return fmt.Errorf("%w: %w", receiver.ErrRefused, err)
	}
	return nil
}

// connOf is the ConnInfo of a proven peer.
func connOf(peer session.Peer, path Path) ConnInfo {
	kind := PeerKindNode
	if peer.Kind == session.PeerClient {
		kind = PeerKindClient
	}
	return ConnInfo{Identity: peer.Name, Kind: kind, Remote: peer.Addr, Path: path}
}

// pathOfConn is a connection's path, by its identity's kind.
func pathOfConn(peer session.Peer) Path {
	if peer.Kind == session.PeerClient {
		return PathClient
	}
	return PathLink
}
