package petrel

import (
	"context"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/sender"
	"github.com/petrelmq/petrel/session"
)

// router is the node as the receiver sees it: where inbound sessions,
// messages, files and client requests go, and which id an identity may
// prove. It is a type of its own, not methods of Node, so that these
// callbacks stay out of the API an embedder reads: they are wiring, and
// only the receiver calls them.
type router struct{ n *Node }

// The receiver finds the optional parts of a Router by type assertion; a
// router that lost one would refuse files or clients without a word.
var (
	_ receiver.Router        = router{}
	_ receiver.FileRouter    = router{}
	_ receiver.FileForwarder = router{}
	_ receiver.ClientRouter  = router{}
	_ receiver.PeerBinder    = router{}
	_ receiver.Rejudger      = router{}
)

// newRouter hands the receiver the node's router. It takes the manager so
// that the manager is built, and stops, before the receiver.
func newRouter(n *Node, _ *sender.Manager) receiver.Router { return router{n: n} }

// AcceptSession implements receiver.Router (see Node.acceptSession).
func (r router) AcceptSession(peer session.Peer, addr string) error {
	return r.n.acceptSession(peer, addr)
}

// Inbound implements receiver.Router (see Node.inbound).
func (r router) Inbound(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, error) {
	return r.n.inbound(ctx, peer, m)
}

// InboundFile implements receiver.FileRouter (see Node.inboundFile).
func (r router) InboundFile(ctx context.Context, peer session.Peer, m *message.Message) (receiver.FileTarget, error) {
	return r.n.inboundFile(ctx, peer, m)
}

// FileTaken implements receiver.FileRouter (see Node.fileTaken).
func (r router) FileTaken(m *message.Message, t receiver.FileTarget) { r.n.fileTaken(m, t) }

// ForwardFile implements receiver.FileForwarder: the relay's sender
// toward the next hop starts sending the file while it is received (see
// sender.Forward).
func (r router) ForwardFile(m *message.Message, t receiver.FileTarget, src *filetransfer.Follower) bool {
	if r.n.mgr == nil {
		src.Close()
		return false
	}
	return r.n.mgr.Forward(t.Queue, m, src)
}

// ClientPublish implements receiver.ClientRouter (see Node.clientPublish).
func (r router) ClientPublish(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, string, error) {
	return r.n.clientPublish(ctx, peer, m)
}

// ClientSubscribe implements receiver.ClientRouter (see
// Node.clientSubscribe).
func (r router) ClientSubscribe(ctx context.Context, peer session.Peer, addr string) (*queue.Queue, error) {
	return r.n.clientSubscribe(ctx, peer, addr)
}

// ClientSubscribeTopic implements receiver.ClientRouter (see
// Node.clientSubscribeTopic).
func (r router) ClientSubscribeTopic(ctx context.Context, peer session.Peer, pattern string, sub session.TopicSubscription) (*queue.Queue, func(), error) {
	return r.n.clientSubscribeTopic(ctx, peer, pattern, sub)
}

// BindPeer implements receiver.PeerBinder: it holds an identity that
// proved its credentials to its node id (see identities).
func (r router) BindPeer(peer session.Peer) error { return r.n.idents.bind(peer) }

// PeerRevoked implements receiver.Rejudger: whether peer's identity still
// admits it as its handshake did (see identities.revoked).
func (r router) PeerRevoked(peer session.Peer) error { return r.n.idents.revoked(peer) }

// SubscriptionRevoked implements receiver.Rejudger (see
// Node.subscriptionRevoked).
func (r router) SubscriptionRevoked(peer session.Peer, addr string, topic bool) error {
	return r.n.subscriptionRevoked(peer, addr, topic)
}
