package petrel

import (
	"context"
	"errors"

	"github.com/petrelmq/petrel/message"
)

// ErrIntercepted is wrapped by the error of a publish or a subscription
// that an Interceptor refused (or that panicked). The interceptor's own
// error is wrapped too, so errors.Is finds an application's sentinel. A
// remote client's Send or Consumer gets the refusal's text, wrapping
// ErrRefused.
var ErrIntercepted = errors.New("refused by an interceptor")

// Interceptor is application code on every path a message takes: the
// node's own Producer and Consumer, remote clients (see Dial), and links
// from other nodes. It audits, enriches, filters or refuses without a
// fork. Register interceptors in Config.Interceptors, or, in an fx
// application, in the value group "petrel.interceptors" (appended after
// Config's); they are read once, when the node opens.
//
// Interceptors run in registration order; the first error stops the
// chain and is the refusal. A panic is recovered, logged with its stack
// (rate-limited) and counts as a refusal: it never takes the node down.
//
// Concurrency: every hook is called from many goroutines at once (one per
// connection, session, producer or consumer) and must be safe for
// concurrent use. Hooks run on the message path, inside sessions whose
// acks wait for them: they must not block. ctx ends when the caller's
// operation does. Embed NopInterceptor to implement only some hooks.
type Interceptor interface {
	// OnConnect is called when a node or client connects to this node,
	// once the handshake proved its identity and before any session
	// opens. An error closes the connection; the peer reconnects later.
	OnConnect(ctx context.Context, c ConnInfo) error
	// OnDisconnect is called once a connection that OnConnect accepted
	// has ended, after its sessions.
	OnDisconnect(c ConnInfo)
	// OnPublish is called with each message entering the node, before
	// the access rules, routing and the store (it may see a message the
	// rules then deny): from its own Producer (Send, SendAsync,
	// file messages and outboxes), a client's publish, or a link's
	// message (relayed ones included). It may change m's Priority, TTL,
	// application Properties and Body; changes to ID, Origin,
	// Destination, Kind, Timestamp and the file properties are undone as
	// the hook returns, before the next interceptor sees m, since they
	// are the message's identity and route. A change that makes m
	// invalid (see message.Message.Validate) refuses it on every path.
	// An error refuses the message for good:
	//   - the node's Send returns an error wrapping ErrIntercepted;
	//   - a remote client's Send returns a refusal (ErrRefused) with the
	//     reason;
	//   - a link's message is refused, and its sender dead-letters it with
	//     the reason.
	OnPublish(ctx context.Context, m *message.Message, from ConnInfo) error
	// OnSubscribe is called when a consumer attaches: Node.Consumer, or
	// a client's subscription. An error refuses it (ErrIntercepted at
	// the node, ErrRefused at a client).
	OnSubscribe(ctx context.Context, s SubscribeInfo) error
	// OnUnsubscribe is called once when a consumer that OnSubscribe
	// accepted goes: Consumer.Close, or the end of a client's
	// subscription.
	OnUnsubscribe(s SubscribeInfo)
	// OnDeliver is called with each message handed to a consumer,
	// redeliveries included. m is the copy delivered: the hook may enrich
	// it (properties) but not refuse it; changes to its identity and route
	// are undone as for OnPublish, and the stored message is unchanged.
	OnDeliver(ctx context.Context, m *message.Message, to ConnInfo)
	// OnAck is called when a consumer acks or nacks a delivery and the
	// node took the settle.
	OnAck(a AckInfo)
}

// Path is the way a message or a connection reaches the node.
type Path uint8

// The paths.
const (
	// PathEmbedded is the node's own Producer and Consumer, in its process.
	PathEmbedded Path = iota + 1
	// PathClient is a remote client's session (see Dial).
	PathClient
	// PathLink is a link from another node.
	PathLink
	// PathMQTT is an MQTT client of the node's MQTT listener.
	PathMQTT
)

// String returns "embedded", "client", "link" or "mqtt".
func (p Path) String() string {
	switch p {
	case PathEmbedded:
		return "embedded"
	case PathClient:
		return "client"
	case PathLink:
		return "link"
	case PathMQTT:
		return "mqtt"
	}
	return "unknown"
}

// ConnInfo is who is at the other end of a hook.
type ConnInfo struct {
	// Identity is the name the other end proved at the handshake: a
	// node's name or a client's identity. With the shared Secret (no
	// Peers), it is a claim, not a proof. On PathEmbedded, it is this
	// node's name.
	Identity string
	// Kind is PeerKindNode or PeerKindClient; "" on PathEmbedded. Under
	// the shared Secret every connection is a node's.
	Kind PeerKind
	// Remote is the other end's network address; "" on PathEmbedded.
	Remote string
	// Path is the way in. A connection's is PathClient for a client
	// identity, else PathLink (a client of the shared Secret too, until
	// its sessions show what it is).
	Path Path
}

// SubscribeInfo is a consumer attaching to or leaving an address.
type SubscribeInfo struct {
	// Address is the receive address consumed.
	Address string
	Conn    ConnInfo
}

// AckInfo is a delivery settled by its consumer.
type AckInfo struct {
	// Address is the receive address the message was delivered from.
	Address string
	ID      uint64
	Origin  message.NodeID
	Conn    ConnInfo
	// Nack is true for a nack (or a client's reject), with its Reason.
	Nack   bool
	Reason string
}

// NopInterceptor implements every hook and does nothing. Embed it in an
// Interceptor to implement only the hooks it needs.
type NopInterceptor struct{}

var _ Interceptor = NopInterceptor{}

func (NopInterceptor) OnConnect(context.Context, ConnInfo) error                   { return nil }
func (NopInterceptor) OnDisconnect(ConnInfo)                                       {}
func (NopInterceptor) OnPublish(context.Context, *message.Message, ConnInfo) error { return nil }
func (NopInterceptor) OnSubscribe(context.Context, SubscribeInfo) error            { return nil }
func (NopInterceptor) OnUnsubscribe(SubscribeInfo)                                 {}
func (NopInterceptor) OnDeliver(context.Context, *message.Message, ConnInfo)       {}
func (NopInterceptor) OnAck(AckInfo)                                               {}
