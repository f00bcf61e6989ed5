package petrel

import (
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Config configures a Node. The zero value of every field means its default,
// so Open(ctx, Config{}) starts a node in ./petrel-data.
type Config struct {
	// Name is the node's human name (default: the host name).
	Name string
	// DataDir holds the node's database and identity (default "petrel-data").
	DataDir string
	// Store configures the durable queues. Store.Path defaults to
	// DataDir/petrel.db.
	Store queue.Config
	// Limits bound every message this node accepts.
	Limits message.Limits
	// Addresses declares the addresses this node knows, with their roles.
	Addresses []AddressConfig
	// NoAutoCreate, when true, refuses sends and consumers for local
	// addresses that are not declared. By default they are created as
	// receive addresses on first use.
	NoAutoCreate bool
	// MaxAutoQueues bounds the receive queues that exist without a
	// declaration: those auto-creation made, for peers, clients and this
	// node's own producers and consumers alike (default 10000). Past it, a
	// message from a peer to a new undeclared address is refused for good
	// with the reason, and a local Send or Consumer gets ErrTooManyQueues.
	MaxAutoQueues int
	// MaxSubscriptionsPerIdentity bounds the topic subscriptions, durable
	// or not, that the remote clients of one identity own at once
	// (default 1000, or a tenth of MaxAutoQueues where that is less), so that one identity cannot take the whole of
	// MaxAutoQueues, which subscriptions count against too. Past it, that
	// identity's subscribe to a new name is refused with the reason; the
	// node's own and the MQTT gateway's subscriptions are not counted
	// (MQTTConfig.MaxSubscriptions and MaxSessions bound the gateway's).
	MaxSubscriptionsPerIdentity int
	// Listen is the TCP address ("host:port") this node accepts links on.
	// Empty: the node accepts no links, but can still open them.
	Listen string
	// Secret is the links' shared secret. When set, a peer must prove it
	// knows it before any queue is touched, and must prove it back. It
	// proves membership, not identity: every holder can claim any name and
	// speak for any origin. It is the simple mode for a trusted network;
	// Peers gives each identity its own credentials instead.
	Secret string
	// Nodes are the other nodes this node can reach directly.
	Nodes []NodeConfig
	// Routes name the neighbour that carries traffic for a node that is not
	// a neighbour.
	Routes []RouteConfig
	// Link tunes sessions and senders.
	Link LinkConfig
	// Discovery finds other nodes by UDP announcements.
	Discovery DiscoveryConfig
	// Files configures file transfer: the spool, the received-files
	// folders, chunks and windows.
	Files FilesConfig
	// Outboxes are folders whose files are sent as they appear.
	Outboxes []OutboxConfig
	// Admin configures the admin HTTP endpoint: health, readiness,
	// Prometheus metrics and the status JSON. Off unless Admin.Listen is set.
	Admin AdminConfig
	// TLS secures links: the listener speaks TLS when TLS.Cert and TLS.Key
	// are set, and tls:// connectors dial with it. A change needs a restart.
	TLS TLSConfig
	// Access are the rules of what other nodes and clients may do with
	// this node's addresses; none at all allows everything. See AccessRule.
	// They change live (Reconfigure).
	Access []AccessRule
	// Peers are the identities that may connect to this node, nodes and
	// clients, each with its own credentials. When any are listed, the
	// listener takes only them (Secret is not accepted from anyone), a
	// client identity may only publish and subscribe, and a peer hands over
	// only messages of its own origin unless it is a relay. Empty: the
	// shared Secret mode. See PeerConfig.
	Peers []PeerConfig
	// Topics declares the topic spaces: an address name that a pattern
	// matches is a topic (multicast), published to every subscription
	// whose pattern matches it. A change needs a restart.
	Topics []TopicConfig
	// HA makes this node one of a live/backup pair on a shared data
	// directory: only the holder of the lock file opens the store. Zero:
	// a standalone node, no lock. A change needs a restart. See HAConfig.
	HA HAConfig

	// TopicInterestGrace is how long a neighbour may be unreachable (no
	// link up either way) before the non-durable topic interest learned
	// from it is dropped, with the publishes waiting toward it that no
	// other interest wants (counted in petrel_topic_pruned_total).
	// Durable interest is kept whatever the outage. Default
	// DefaultTopicInterestGrace (5m). A change needs a restart.
	TopicInterestGrace time.Duration
	// TopicForwardMaxQueued bounds the topic publishes that wait toward
	// one neighbour, in its send queue for topic traffic
	// ("_petrel.topics@<neighbour>"), sent or not, for the interest
	// learned from it: a site that is away for long would otherwise fill
	// this node's store until every send here fails. Past it, a publish
	// gets no copy toward that neighbour, counted in
	// petrel_queue_overflowed_total{queue="_petrel.topics@<neighbour>"};
	// its copies for the others are stored and the publish succeeds, as
	// for a subscription at its max_queued_messages. At least link.window
	// when set, so that a link that keeps up never drops. 0 (the default):
	// none but the store's bound, so that durable interest keeps every
	// publish while its site is away. A change needs a restart.
	TopicForwardMaxQueued int64
	// TopicForwardOverflow is which publishes go past
	// TopicForwardMaxQueued: "drop_new" (the default) keeps the first and
	// drops what comes after; "drop_oldest" keeps the latest, the topic
	// janitor dropping the oldest that are not in flight just after the
	// publishes that passed the bound (interest messages always stay). A
	// change needs a restart.
	TopicForwardOverflow string

	// MQTT is the node's MQTT listener; off unless MQTT.Listen is set. A
	// change needs a restart.
	MQTT MQTTConfig
	// ConfigSource names the file this configuration came from, for
	// status; "" when there is none.
	ConfigSource string
	// Logger receives the node's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Interceptors are called on every path a message takes, in this
	// order (see Interceptor). Read when the node opens; a reload keeps
	// them. An fx application may also provide them to the value group
	// "petrel.interceptors", which runs after these.
	Interceptors []Interceptor
}

// NodeConfig is another node and how to reach it.
type NodeConfig struct {
	// Name of the node.
	Name string
	// Connector is how to reach it: "tcp://host:port",
	// "static:(tcp://a:1,tcp://b:2)" or "failover:(tcp://main:1,tcp://backup:2)".
	Connector string
	// Secret is the secret this node proves to that node, and that node
	// proves back, when dialing it: the secret of this node's entry in that
	// node's Peers. Empty: this node's entry in Peers, if it lists that
	// node, else the shared Secret.
	Secret string
}

// PeerConfig is one identity that may connect to this node.
type PeerConfig struct {
	// Name is the identity: the name a node or client connects with (a
	// node's own node name, a client's DialOptions.Name), or, under mutual
	// TLS, its certificate's Common Name.
	Name string
	// Secret is the identity's own secret, which it proves at the
	// handshake and this node proves back. Empty only under mutual TLS
	// (TLS.ClientAuth require_and_verify): the certificate proves it.
	Secret string
	// Kind is PeerKindNode (the default) or PeerKindClient. A client may
	// open publish and subscribe sessions only; its publishes carry its
	// own id.
	Kind PeerKind
	// Relay lets a node identity hand over messages made by other nodes,
	// as a hub relaying its plants does. Without it, its messages must be
	// of its own origin (its id). A relay can speak for any origin: give
	// it only to nodes trusted as much as this one.
	Relay bool
	// ID pins the node id the identity must prove. Zero: the id it proves
	// at its first connection is bound to it, and kept in the data
	// directory (see the README's Identities section to re-bind one).
	ID message.NodeID
}

// HAConfig makes a node one of a live/backup pair that share one data
// directory (a SAN volume or a DRBD device mounted by both machines, or a
// local disk for tests). Both run the same configuration, with the same
// name, identity and listen port. Each takes an exclusive lock on
// DataDir/Lock before it opens anything in the directory:
//
//   - the live takes it at once, or Open fails with ErrHALocked: a second
//     live never opens a store that another process holds;
//   - the backup waits for it, for as long as Open's context lasts, and
//     when the process that held it dies (the kernel drops the lock with
//     it) opens the same store and identity, listens and announces itself
//     as the node.
//
// Only the lock holder ever opens the store, so split brain cannot
// happen on storage whose locks are honoured by every machine that mounts
// it. The lock does not move back: a live that restarts while the backup
// serves fails with ErrHALocked until the backup stops.
type HAConfig struct {
	// Role is HARoleLive or HARoleBackup; "" for a standalone node.
	Role HARole
	// Lock is the name of the lock file in the data directory (default
	// "ha.lock"); a plain file name, no path.
	Lock string
}

// HARole is a node's part in a live/backup pair.
type HARole string

// The values of HAConfig.Role.
const (
	HARoleLive   HARole = "live"
	HARoleBackup HARole = "backup"
)

// PeerKind is what an identity in Peers is.
type PeerKind string

// The values of PeerConfig.Kind; "" means PeerKindNode.
const (
	PeerKindNode   PeerKind = "node"
	PeerKindClient PeerKind = "client"
)

// DiscoveryConfig turns on discovery: the node announces itself on a UDP
// broadcast or multicast group and listens there for other nodes, which
// become reachable without configuration. Static nodes win over
// discovered ones of the same name.
type DiscoveryConfig struct {
	// Enabled turns discovery on.
	Enabled bool
	// Group is the broadcast address or multicast group and port
	// ("127.255.255.255:7401", "239.255.74.1:7401"); empty means the
	// address package's default.
	Group string
	// Interface names the network interface to use; empty lets the
	// routing table choose.
	Interface string
	// Period is how often the node announces itself (default 2s); Timeout
	// how long a node stays known without being heard (default 10s).
	Period, Timeout time.Duration
	// Advertise is the connector other nodes reach this one by. Empty
	// means tcp:// and the address the node listens on, which must then be
	// a specific host, not 0.0.0.0.
	Advertise string
	// MaxNodes bounds the nodes discovery keeps in the directory (default
	// 1024). Announcements from further new nodes are dropped and
	// counted; the nodes already known go on refreshing.
	MaxNodes int
}

// AdminConfig configures the admin HTTP endpoint (see Node.AdminAddr).
type AdminConfig struct {
	// Listen is the TCP address ("host:port") the admin endpoint serves
	// /healthz, /readyz, /metrics and /api/status on; port 0 takes a free
	// port. Empty: no admin listener (the unix socket petrel.sock in the
	// data directory still serves the same endpoints). Every request must
	// name the listener (or a loopback name, or one of Hosts) in its Host
	// header and, if it has one, its Origin, and POSTs must be
	// application/json. A Listen that is not a loopback address needs a
	// Token: Open refuses it without one (ErrAdminExposed).
	Listen string
	// Token, when set, is the bearer token every request to the TCP
	// listener must carry ("Authorization: Bearer <token>"), except
	// /healthz, /readyz and, unless MetricsAuth, /metrics. At least 16
	// printable ASCII characters, no spaces. The unix socket needs none:
	// whoever reaches it is the node's user.
	Token string
	// MetricsAuth, when true, asks the token of /metrics too.
	MetricsAuth bool
	// Hosts are more names the listener answers to in the Host header
	// ("petrel.example.com", or "name:port" for that port only), beside
	// its own address and, on loopback, localhost. Any other Host is
	// refused, which defeats DNS rebinding.
	Hosts []string
	// FileRoots are the directories whose files POST /api/files may send
	// when it comes over TCP; none: it may send none. Over the unix socket
	// it sends any file the node's user can read.
	FileRoots []string
}

// RouteConfig says that traffic for Node goes through the neighbour Via.
type RouteConfig struct {
	Node string
	Via  string
}

// LinkConfig tunes links. Zero fields take their defaults.
type LinkConfig struct {
	// Window is how many Data packets a sender keeps unacknowledged in
	// flight per session (default 4096; WindowBytes bounds their bytes).
	Window int
	// WindowBytes bounds the bytes of those packets' messages (default
	// 16 MiB): with large messages the count alone would hold a thousand
	// of them in memory. A sender under the bound sends its next message
	// whatever its size, so one message larger than the bound still goes.
	WindowBytes int64
	// MaxFrame caps a frame's length; a longer one is a protocol error
	// (default 16 MiB).
	MaxFrame int
	// HandshakeTimeout bounds the connection handshake and each session
	// opening (default 10s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each write to a peer (default 10s).
	WriteTimeout time.Duration
	// IdleTimeout drops a peer silent this long; heartbeats keep a healthy
	// link busy (default 30s).
	IdleTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the sender's exponential backoff,
	// which has jitter (defaults 100ms and 1s, so a peer that comes back
	// is found within a second).
	ReconnectMin, ReconnectMax time.Duration
	// MainProbe is how often a link running on a failover backup checks
	// whether the main connector is back (default 5s).
	MainProbe time.Duration
	// StallAfter is how long a sender's full window may go without an ack
	// before its link is reported stalled (LinkStatus.Stalled, "(stalled)"
	// in petrel stat): connected, yet nothing moves (default 10s).
	StallAfter time.Duration
	// MaxHandshakes bounds the inbound connections still in their TLS or
	// session handshake (default 256), MaxHandshakesPerIP those from one
	// remote IP (default 16), and MaxConnections every inbound connection
	// open at once, in its handshake or authenticated (default 1024).
	// A connection past a bound is closed as soon as it is accepted.
	MaxHandshakes, MaxHandshakesPerIP, MaxConnections int
	// MaxConnBuffer bounds the bytes of received messages an inbound
	// connection holds before they are stored (default 64 MiB, at least
	// twice MaxFrame). Past it the node stops reading that connection, so
	// a slow disk slows the peer instead of growing memory.
	MaxConnBuffer int64
	// MaxSubscriptionHeld bounds the bytes of the messages a remote
	// client's consumer or subscription holds leased and not yet settled
	// (default 8 MiB), MaxHeld those of every remote consumer together
	// (default 256 MiB): each lease keeps its message in this node's
	// memory. At a bound the node delivers nothing more to that consumer
	// until it settles, or its leases time out; under it the next message
	// goes whatever its size, so one larger than the bound still goes.
	MaxSubscriptionHeld, MaxHeld int64
	// MaxSessionsPerIdentity bounds the sessions one remote client
	// identity (kind client in Peers) holds open at once, across all its
	// connections and Dials: one for each client's producers and one per
	// consumer or subscription (default 4096). MaxConnectionsPerIdentity
	// bounds its inbound connections (default 64); a Dial opens one, and
	// one more for each 1,023 consumers past the first connection's. A
	// session past the bound is refused with the reason (ErrRefused at the
	// client), a connection at its handshake. Node identities are not
	// bounded by them: their links carry one session per send queue.
	MaxSessionsPerIdentity, MaxConnectionsPerIdentity int
}

// AddressConfig declares one address on this node.
type AddressConfig struct {
	// Name of the address, without "@node".
	Name string
	// Role of the address on this node.
	Role address.Role
	// Node is, for a send address, the node that hosts it: a send to the
	// bare name goes to Name@Node.
	Node string
	// Queue is the consumer-side policy of a receive address.
	Queue queue.Policy
	// ReceivedDir is where the files received for this address are
	// placed (default Files.Received/<name>).
	ReceivedDir string
}

// FilesConfig configures file transfer. Zero fields take their defaults.
type FilesConfig struct {
	// Spool holds the files being received until they are whole and
	// verified, and the files a relay holds until it has forwarded them
	// (default DataDir/spool). Put it on the filesystem of the received
	// folders, so that delivery is a link, not a copy.
	Spool string
	// Received is the folder under which each address's received files
	// are placed, one subfolder per address (default DataDir/received).
	Received string
	// ChunkSize is the content bytes per chunk packet (default 512 KiB, or
	// Link.MaxFrame - 8 if that is less);
	// at most Link.MaxFrame.
	ChunkSize int
	// Window is the most chunks in flight per transfer (default 16).
	Window int
	// Concurrency is how many files of one send queue move at once
	// (default 4).
	Concurrency int
	// SyncBytes is how many bytes a receiver appends between two
	// checkpoints (fsync of the data, and the offset recorded), at most
	// (default 16 MiB). A receiver that crashes or loses its link has the
	// sender send again what came after its last checkpoint.
	SyncBytes int64
	// AbandonAfter is how long a partly received file may go without
	// progress before the spool drops it, its sender presumed gone for
	// good (default 7 days). A sender that comes back later starts it
	// again from the beginning.
	AbandonAfter time.Duration
	// MaxSpoolBytes bounds the space the files being received take in
	// the spool, each counted at its announced size (default 64 GiB).
	// MaxSpoolBytesPerPeer bounds those handed over by one peer (default
	// half of MaxSpoolBytes). A file that does not fit now waits, paused,
	// and its sender tries again; one that could never fit is refused
	// for good with the reason.
	MaxSpoolBytes, MaxSpoolBytesPerPeer int64
	// BufferedWrites writes the files received through the page cache
	// only. By default, on Linux, a receiver writes a file's chunks with
	// O_DIRECT where the spool's filesystem takes it, which spares the
	// CPU of the page cache copy; set this where direct writes are slow,
	// as on some network filesystems.
	BufferedWrites bool
}

// OutboxConfig is a folder whose files are sent to one address.
type OutboxConfig struct {
	// Dir is the folder watched. Files directly in it are sent; its sent/
	// and failed/ subfolders, and names starting with "." or ending in
	// ".part", are not.
	Dir string
	// To is the address the files go to, "name@node" or a local name.
	To string
	// After is what happens to a file once the next hop has it: "sent"
	// (the default) moves it to Dir/sent, "delete" removes it. A file
	// that fails is moved to Dir/failed, with <name>.reason beside it.
	After string
	// Quiet is how long a file must stay unchanged, and closed, before it
	// counts as complete (default 2s). A file renamed from "x.part" to
	// "x" counts at once.
	Quiet time.Duration
}

// Aliases of the store's types, so that embedders need not import queue.
type (
	// QueueStats are one queue's figures; see Node.QueueStats.
	QueueStats = queue.Stats
	// QueuePolicy is a receive address's consumer policy.
	QueuePolicy = queue.Policy
	// StoreConfig configures the node's store.
	StoreConfig = queue.Config
)

// Sync modes of the store.
const (
	// SyncFull fsyncs every commit: nothing acknowledged is lost on power
	// loss. The default.
	SyncFull = queue.SyncFull
	// SyncNormal may lose the last commits on power loss, never on a
	// process crash.
	SyncNormal = queue.SyncNormal
)
