package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/sender"
	"github.com/petrelmq/petrel/session"
	"go.uber.org/fx"
)

// defaultLinkWindow is link.window's default: a count that keeps a link's
// commits full with small messages, the byte bound (link.window_bytes)
// holding large ones. 1,000 left a link waiting on acks: 4,000 ran
// 1.17-1.2x faster in bench link.
const defaultLinkWindow = 4096

// buildRouting makes the directory of neighbours and the route table.
// Config.Validate ran before, so the connectors parse.
func buildRouting(cfg Config) (*address.Directory, *address.Routes) {
	dir := address.NewDirectory()
	var entries []address.Entry
	var neighbours []string
	for _, n := range cfg.Nodes {
		cs, _ := address.ParseConnectors(n.Connector)
		entries = append(entries, address.Entry{Name: n.Name, Connectors: cs, Source: address.SourceStatic})
		neighbours = append(neighbours, n.Name)
	}
	dir.SetStatic(entries)
	via := map[string]string{}
	for _, r := range cfg.Routes {
		via[r.Node] = r.Via
	}
	return dir, address.NewRoutes(cfg.Name, neighbours, via)
}

type linkOut struct {
	fx.Out
	Session  session.Config
	Sender   sender.Config
	Receiver receiver.Config
}

// linkConfigs derives the link packages' configurations from the node's,
// and loads the identities the links authenticate with, written again
// when the node stops.
func linkConfigs(lc fx.Lifecycle, n *Node, t nodeTLS) (linkOut, error) {
	c := n.cfg
	idents, err := newIdentities(c, n.id)
	if err != nil {
		return linkOut{}, err
	}
	n.idents = idents
	// Appended before the receiver's hook, so it runs after the receiver
	// stopped: no handshake binds an id once the bindings are written.
	lc.Append(fx.Hook{OnStop: func(context.Context) error { return idents.close() }})
	sc := session.Config{
		Name: c.Name, ID: n.id, MaxFrame: uint32(c.Link.MaxFrame),
		HandshakeTimeout: c.Link.HandshakeTimeout, WriteTimeout: c.Link.WriteTimeout,
		IdleTimeout: c.Link.IdleTimeout, MaxConnBuffer: c.Link.MaxConnBuffer, Logger: c.Logger,
	}
	if c.Secret != "" {
		sc.Secret = []byte(c.Secret)
	}
	// Dialing, the secret is the one held for the node reached, if any;
	// listening, the peers are who may connect, when any are listed.
	dial, listen := sc, sc
	dial.Credentials = idents.dialCredential
	if len(c.Peers) > 0 {
		listen.Credentials = idents.credential
	}
	window := c.Link.Window
	if window <= 0 {
		window = defaultLinkWindow
	}
	// A client's publish session may have DefaultClientWindow packets in
	// flight, more than a link's sender keeps: the client bounds its
	// flight in bytes too (DialOptions.WindowBytes), and the connection's
	// buffer here is bounded in bytes (link.max_conn_buffer_bytes), so the count
	// only has to be large enough to keep the commits full.
	listen.PublishWindow = uint32(max(window, DefaultClientWindow))
	return linkOut{
		Session: dial,
		Sender: sender.Config{
			Window: window, WindowBytes: c.Link.WindowBytes, ReconnectMin: c.Link.ReconnectMin, ReconnectMax: c.Link.ReconnectMax, MainProbe: c.Link.MainProbe,
			StallAfter: c.Link.StallAfter,
			Files:      n.senderFiles(), Now: c.Store.Now, Logger: c.Logger, TLS: t.client,
		},
		Receiver: receiver.Config{
			Listen: c.Listen, Session: listen, Window: uint32(window), Limits: c.Limits, Logger: c.Logger,
			Spool: n.spool, FileSyncBytes: n.files.SyncBytes, TLS: t.server,
			MaxHandshakes: c.Link.MaxHandshakes, MaxHandshakesPerIP: c.Link.MaxHandshakesPerIP, MaxConnections: c.Link.MaxConnections,
			MaxSubscriptionHeld: c.Link.MaxSubscriptionHeld, MaxHeld: c.Link.MaxHeld,
			MaxSessionsPerIdentity: c.Link.MaxSessionsPerIdentity, MaxConnectionsPerIdentity: c.Link.MaxConnectionsPerIdentity,
		},
	}, nil
}

// Reachable reports whether this node has a way to node now: a neighbour,
// a route, or a node that discovery found.
func (n *Node) Reachable(node string) bool {
	_, ok := n.nextHop(node)
	return ok
}

func newManager(n *Node, sc session.Config, c sender.Config) *sender.Manager {
	n.mgr = sender.NewManager(c, sc, n.dir, n.nextHop)
	return n.mgr
}

// startSenders starts a sender for every send queue that survived a
// restart, so a backlog flows again without waiting for a new send.
func (n *Node) startSenders(ctx context.Context) error {
	for _, q := range n.store.Queues() {
		if q.Kind() != queue.KindSend {
			continue
		}
		_, node, err := message.ParseDestination(q.Name())
		if err != nil || node == "" {
			n.log.Warn("send queue with an unexpected name; not forwarding it", logkey.Queue, q.Name())
			continue
		}
		n.mgr.Ensure(q, node)
	}
	for _, a := range n.addresses {
		if a.Role == address.RoleSend {
			if _, err := n.sendQueue(ctx, a.Name, a.Node); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendQueue returns the send queue toward name@node, making it and its
// sender if needed.
//
// A send to a node with no route fails with ErrNoRoute even when its send
// queue exists: send queues outlive the route that made them (a neighbour
// or route removed by a reload), and a message put there would be acked to
// its producer with nothing to take it. What already waits there stays,
// and goes once a route returns. A discovered node that went silent is an
// outage, not a removal: sends to it wait in its queue (Directory.Silent).
func (n *Node) sendQueue(ctx context.Context, name, node string) (*queue.Queue, error) {
	if !n.sendable(node) {
		return nil, fmt.Errorf("send to %s@%s: node %q is neither a neighbour nor routed: %w", name, node, node, ErrNoRoute)
	}
	if q, ok := n.store.Lookup(message.JoinDestination(name, node)); ok && q.Kind() == queue.KindSend {
		n.mgr.Ensure(q, node)
		return q, nil
	}
	q, err := n.store.Queue(ctx, message.JoinDestination(name, node), queue.KindSend)
	if err != nil {
		return nil, err
	}
	n.mgr.Ensure(q, node)
	return q, nil
}

// acceptSession decides for the router whether a session opens. Any
// well-formed address may open one: whether this node takes its messages
// is decided per message, so that a refusal reaches the sender as a
// permanent refusal of each message (which it dead-letters) rather than
// as a link that never comes up.
//
// A node identity's first link or file session binds it to the id it
// proved (identities.bindNode); one proving another id is refused.
func (n *Node) acceptSession(peer session.Peer, addr string) error {
	if _, _, err := message.ParseDestination(addr); err != nil {
		return fmt.Errorf("session address: %w", err)
	}
	if err := n.idents.bindNode(peer); err != nil {
		return err
	}
	return nil
}

// accepts decides whether this node takes a message for address name of
// node ("" or its own name for this node): to receive it, or to relay it.
// For a message to relay it returns the next hop toward node, "" for one
// to receive here.
func (n *Node) accepts(name, node string) (hop string, err error) {
	n.mu.Lock()
	a, declared := n.addresses[name]
	n.mu.Unlock()
	if node == "" || node == n.cfg.Name {
		if declared && a.Role != address.RoleReceive {
			return "", fmt.Errorf("%w: node %s does not receive %q (it is a %s address here)", receiver.ErrRefused, n.cfg.Name, name, a.Role)
		}
		if !declared && n.noAutoCreate.Load() {
			return "", fmt.Errorf("%w: node %s has no address %q", receiver.ErrRefused, n.cfg.Name, name)
		}
		return "", nil
	}
	if !declared || a.Role != address.RoleRelay {
		return "", fmt.Errorf("%w: node %s does not relay %q to %s", receiver.ErrRefused, n.cfg.Name, name, node)
	}
	hop, ok := n.nextHop(node)
	if !ok {
		return "", fmt.Errorf("%w: node %s relays %q but has no route to %s", receiver.ErrRefused, n.cfg.Name, name, node)
	}
	return hop, nil
}

// inbound is the router's choice of the queue an arriving message goes
// to, by its destination. The access rules decide first: a message for a
// local address needs the peer to be allowed to send to it, one for
// another node to relay it; a denial is a refusal for good, which the
// sender dead-letters with the reason.
func (n *Node) inbound(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, error) {
	name, node, err := message.ParseDestination(m.Destination)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", receiver.ErrRefused, err)
	}
	action := ActionSend
	if node != "" && node != n.cfg.Name {
		action = ActionRelay
	}
	if err := n.authorizeInbound(peer.Name, action, m.Destination); err != nil {
		return nil, fmt.Errorf("%w: %w", receiver.ErrRefused, err)
	}
	if (node == "" || node == n.cfg.Name) && name == interestAddr {
		if len(n.topics.spaces) == 0 {
			return nil, fmt.Errorf("%w: node %s declares no topic space, so takes no topic interest", receiver.ErrRefused, n.cfg.Name)
		}
		if err := n.authorizeInterest(peer, m); err != nil {
			return nil, err
		}
		return n.inbox(ctx) // applied by the inbox pump
	}
	if err := reservedName(name); err != nil && (node == "" || node == n.cfg.Name) {
		return nil, fmt.Errorf("%w: node %s: %w", receiver.ErrRefused, n.cfg.Name, err)
	}
	if (node == "" || node == n.cfg.Name) && n.topics.isTopic(name) {
		if m.Kind == message.KindFile {
			return nil, fmt.Errorf("%w: node %s: %q: %w", receiver.ErrRefused, n.cfg.Name, name, ErrFileToTopic)
		}
		return n.inbox(ctx) // fanned out by the inbox pump
	}
	hop, err := n.accepts(name, node)
	if err != nil {
		return nil, err
	}
	if reason := n.routingLoop(peer, m, hop); reason != "" {
		n.loops.Add(1)
		if held, ok := n.loopLog.Allow(peer.Name); ok {
			n.log.Warn("message refused: a routing loop (logged once a minute per peer)", slog.String(logkey.Peer, peer.Name),
				slog.String(logkey.To, m.Destination), slog.String(logkey.Reason, reason), slog.Int64("suppressed", held))
		}
		return nil, fmt.Errorf("%w: %s", receiver.ErrRefused, reason)
	}
	if node == "" || node == n.cfg.Name {
		q, err := n.receiveQueue(ctx, name)
		if errors.Is(err, address.ErrTopicName) {
			// A name inside a topic space that is no topic name is
			// refused for good (topics.misnamed): sent again, it would
			// be refused again.
			return nil, fmt.Errorf("%w: node %s: %w", receiver.ErrRefused, n.cfg.Name, err)
		}
		return q, err
	}
	return n.sendQueue(ctx, name, node)
}

// routingLoop returns why m, handed over by peer to relay through hop
// ("" for a message to receive here), is going round a routing loop,
// or "" if it is not seen to be. Routes are each node's own, so two
// nodes can route a destination to each other: each would hand the
// message on, and the second time round the first would drop it as a
// duplicate, acked and lost without a word. Two loops are caught here,
// and refused for good, so that the sender dead-letters the message with
// the reason:
//   - the route to node leads back to peer, which handed the message over;
//   - the message is this node's own: a node never needs its own
//     messages back, so one that returns has gone round.
//
// A loop of three relays or more that does not pass the message's origin
// is not seen: messages carry no list of the nodes they crossed (topic
// publishes do, see propHops).
func (n *Node) routingLoop(peer session.Peer, m *message.Message, hop string) string {
	if peer.Kind == session.PeerClient {
		return "" // a client publishes under its own id, and routes nothing
	}
	if m.Origin == n.id {
		return fmt.Sprintf("routing loop: node %s's own message %d came back from %s", n.cfg.Name, m.ID, peer.Name)
	}
	if hop != "" && hop == peer.Name {
		_, node, _ := message.ParseDestination(m.Destination)
		return fmt.Sprintf("routing loop: node %s's route to %s leads back to %s, which handed the message over", n.cfg.Name, node, peer.Name)
	}
	return ""
}

// Links returns the status of every link: one per send queue.
func (n *Node) Links() []sender.Status { return n.mgr.Statuses() }

// ListenAddr returns the address the node accepts links on, "" if none.
func (n *Node) ListenAddr() string {
	if n.srv == nil || n.srv.Addr() == nil {
		return ""
	}
	return n.srv.Addr().String()
}

// CutLink closes the connection to a neighbour. Its senders back off and
// reconnect; nothing is lost. The demo and tests use it.
func (n *Node) CutLink(node string) { n.mgr.Pool().Drop(node) }

// ReceiverStats returns the receiver's counters (zero if not listening).
func (n *Node) ReceiverStats() ReceiverStats {
	if n.srv == nil {
		return ReceiverStats{}
	}
	st := n.srv.StatsRef()
	overLimit := int64(n.srv.RefuseStats().OverLimit.Load())
	ic := n.srv.IdentityCounts()
	return ReceiverStats{
		SessionsOverIdentity: ic.SessionsRefused, ConnectionsOverIdentity: ic.ConnectionsRefused,
		Connections: st.Connections.Load(), HandshakeFailed: st.HandshakeFailed.Load(), AuthFailed: st.AuthFailed.Load(),
		TLSFailed: st.TLSFailed.Load(), SessionsRefused: st.SessionsRefused.Load() + overLimit, SessionsOverLimit: overLimit,
		Received: st.Received.Load(), Stored: st.Stored.Load(),
		Deduped: st.Deduped.Load(), Refused: st.Refused.Load(), ProtocolErrors: st.ProtocolErrors.Load(),
		FilesTaken: st.FilesTaken.Load(), FilesRefused: st.FilesRefused.Load(), FilesCorrupt: st.FilesCorrupt.Load(),
		FileBytes: st.FileBytes.Load(), ClientDenied: st.Denied.Load(), ClientDelivered: st.Delivered.Load(),
		ForgedOrigins: st.ForgedOrigins.Load(), ClientLinkRefused: st.KindRefused.Load(),
		FilesOutsideSession: st.FilesOutsideSession.Load(), RoutingLoops: n.loops.Load(),
		StoreFull: st.StoreFull.Load(), AcceptErrors: st.AcceptErrors.Load(),
	}
}

// Transfers returns the files this node is receiving, and those paused
// (a full spool, the spool quota) while the connection they came on is
// up: their sender tries them again. The paused ones are bounded, 64 per
// peer and 4,096 in all, the oldest dropped first
// (petrel_file_transfers_evicted_total). A transfer whose connection
// ended is listed again once its sender resumes it.
func (n *Node) Transfers() []TransferStatus {
	if n.srv == nil {
		return nil
	}
	return n.srv.Transfers()
}

// TransferStatus is one file being received; see Node.Transfers.
type TransferStatus = receiver.TransferStatus

// ReceiverStats count what the node's receiver saw since it started.
type ReceiverStats struct {
	Connections, HandshakeFailed, AuthFailed, SessionsRefused int64
	TLSFailed                                                 int64 // of HandshakeFailed, at the TLS handshake
	Received, Stored, Deduped, Refused, ProtocolErrors        int64
	FilesTaken, FilesRefused, FilesCorrupt, FileBytes         int64
	// AcceptErrors counts the link listener's accept errors that pass
	// (out of file descriptors and the like), each retried after a wait
	// that doubles up to a second.
	AcceptErrors int64
	// SessionsOverLimit counts, of SessionsRefused, the sessions a peer
	// asked for past the 1,024 one connection holds
	// (session.DefaultMaxSessions).
	SessionsOverLimit int64
	// SessionsOverIdentity counts, of SessionsRefused, the sessions a
	// client identity asked for past Link.MaxSessionsPerIdentity, all its
	// connections together; ConnectionsOverIdentity the connections it
	// opened past Link.MaxConnectionsPerIdentity, refused at their
	// handshake (of HandshakeFailed).
	SessionsOverIdentity, ConnectionsOverIdentity int64
	// ClientDenied counts the remote clients' publishes and subscriptions
	// the access rules refused; ClientDelivered the messages pushed to
	// their consumers, redeliveries included.
	ClientDenied, ClientDelivered int64
	// ForgedOrigins counts messages refused because their peer may not
	// speak for their origin (of Refused, or of FilesRefused for file
	// announcements); ClientLinkRefused the link and file sessions client
	// identities tried to open.
	ForgedOrigins, ClientLinkRefused int64
	// RoutingLoops counts the messages refused because they were going
	// round a routing loop (of Refused, or of FilesRefused): the route to
	// their destination led back to the peer that handed them over, or
	// they were this node's own.
	RoutingLoops int64
	// FilesOutsideSession counts the file messages refused because a peer
	// or client sent them in an ordinary session, not as the announcement
	// of a file session (of Refused).
	FilesOutsideSession int64
	// StoreFull counts the sessions of links and remote clients that the
	// receiver ended because its store had no room for what they carried
	// (store bounds with on_full: error, or a full disk): their senders
	// try again; a client's Send fails with ErrStoreFull.
	StoreFull int64
}

// LinkStatus is one link's state; see Node.Links.
type LinkStatus = sender.Status
