package session

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/message"
)

// ProtocolVersion is the session protocol version this package speaks. It
// is offered in Hello and in SessionCreate, and sent in Auth.
const ProtocolVersion = 1

// Defaults for the zero fields of Config.
const (
	DefaultMaxFrame         = 16 << 20
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultIdleTimeout      = 30 * time.Second
	DefaultMaxSessions      = 1024
)

// MaxConnsPerPeer bounds the connections one side opens to the same peer
// when each already carries as many sessions as it may (ErrLimit): a
// link's senders toward one neighbour, a client's consumers toward its
// node. With DefaultMaxSessions each, 16 connections carry 16,384
// sessions.
const MaxConnsPerPeer = 16

// MaxWindow is the largest session window. Open and Accept lower larger
// windows to it. It bounds the queues a session allocates up front: Data
// waiting for Recv and acks waiting to be read.
const MaxWindow = 1 << 16

// maxNameLen bounds Config.Name so that Hello and Auth always fit in the
// 4 KiB allowed before authentication. Node names are far shorter (see
// message.ValidName); this only keeps the arithmetic safe.
const maxNameLen = 1024

// Config is what one node brings to a connection. The zero value of every
// field but Name and ID means its default.
type Config struct {
	Name string         // this node's name, sent in Hello or Auth and in session packets
	ID   message.NodeID // this node's unique id

	// Secret is the shared secret of the challenge–response; nil = none.
	// A server with a secret refuses clients that do not prove they know it;
	// a client with a secret refuses servers that do not prove it back.
	// It proves membership of the group that holds it, not identity: the
	// simple mode for a trusted network. A server with Credentials ignores
	// it.
	Secret []byte

	// Credentials, when set, gives each identity its own credential, by
	// name. On Server it is the list of who may connect: the name a client
	// claims must be a valid name (message.ValidName) with a credential
	// here, and the client proves that credential's secret (or a verified
	// certificate vouches for it, see Credential.Secret); the server proves
	// the same secret back. Anyone else is refused with ErrAuth. On Client
	// it gives the secret to use with the server that Hello names, when
	// that server has one of its own; Secret otherwise.
	Credentials func(name string) (Credential, bool)

	// MaxFrame bounds the payload of a Data frame, both ways; default
	// 16 MiB. Both ends must agree: a peer sending larger frames is
	// disconnected. Together with a session's window it bounds the memory a
	// session can hold (Window × MaxFrame).
	MaxFrame uint32

	// HandshakeTimeout bounds the whole Hello/Auth/AuthOK exchange, and
	// each SessionCreate and SessionClose round trip; default 10s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each write of queued frames to the socket; a
	// write that takes longer fails the connection; default 10s.
	WriteTimeout time.Duration
	// IdleTimeout drops a peer from which nothing arrived for this long
	// (ErrIdle); default 30s.
	IdleTimeout time.Duration
	// PingInterval: a Ping is sent when nothing was written for this long;
	// default IdleTimeout/3. It must be well below the peer's IdleTimeout.
	PingInterval time.Duration

	// CheckPeer, when set, is called by Server with the identity a client
	// claims, once its secret checked out and before AuthOK is sent. An
	// error refuses the client, with the error's text as the reason; wrap
	// ErrAuth in it so that both sides count an authentication failure.
	// The receiver uses it to hold a client with a verified TLS certificate
	// to the name in that certificate. Client ignores it.
	CheckPeer func(Peer) error

	// Certified is the name the transport proved already: the Common Name
	// of the client's verified TLS certificate, set by the receiver per
	// connection. A credential without a secret is accepted for this name
	// only. Empty: none.
	Certified string

	// MaxSessions bounds the sessions open or waiting for Accept on one
	// connection; a SessionCreate past it is refused, and counted in
	// RefuseStats. Default 1024.
	MaxSessions int

	// MaxConnBuffer bounds the bytes of Data a server connection holds
	// for its sessions' Recv, all sessions together; default
	// DefaultMaxConnBuffer (64 MiB), and never less than twice MaxFrame.
	// When a connection reaches it, its read loop stops reading the
	// socket until Recv takes frames: a slow receiver slows its peer
	// (TCP backpressure) instead of growing memory.
	MaxConnBuffer int64
	// PublishWindow, on a server, is the least window Accept grants a
	// client's publish session (Conn.OpenPublish), whatever window Accept
	// is given: a client asks for its window in messages but bounds its
	// flight in bytes too, and what the session holds here is bounded in
	// bytes by MaxConnBuffer, so a publish session may run with more
	// packets in flight than a link's sender keeps. 0: none; the client's
	// request and MaxWindow still cap it.
	PublishWindow uint32
	// BufferStats, when set, is fed by every connection made with this
	// Config: buffered bytes and read pauses (see MaxConnBuffer).
	BufferStats *BufferStats
	// RefuseStats, when set, is fed by every server connection made with
	// this Config: the SessionCreates refused past MaxSessions.
	RefuseStats *RefuseStats

	// Logger receives lifecycle logs at Debug level; slog.Default() when
	// nil. Errors are returned (Conn.Err, Session.Err), not logged.
	Logger *slog.Logger

	// versions overrides the [min, max] protocol versions spoken, for
	// tests that need a peer of another version. Zero means
	// [ProtocolVersion, ProtocolVersion].
	versions [2]uint16
}

// withDefaults returns cfg with its zero fields set, or an error naming the
// field that cannot work.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		return cfg, fmt.Errorf("session config: Name is empty; set it to this node's name")
	}
	if len(cfg.Name) > maxNameLen {
		return cfg, fmt.Errorf("session config: Name is %d bytes, longer than %d", len(cfg.Name), maxNameLen)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxFrame < 64 {
		return cfg, fmt.Errorf("session config: MaxFrame %d is too small to carry a message; use at least 64 (default %d)", cfg.MaxFrame, DefaultMaxFrame)
	}
	cfg.HandshakeTimeout = orDefault(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.PingInterval = orDefault(cfg.PingInterval, cfg.IdleTimeout/3)
	if cfg.MaxConnBuffer <= 0 {
		cfg.MaxConnBuffer = DefaultMaxConnBuffer
	}
	cfg.MaxConnBuffer = max(cfg.MaxConnBuffer, 2*int64(cfg.MaxFrame))
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.versions == [2]uint16{} {
		cfg.versions = [2]uint16{ProtocolVersion, ProtocolVersion}
	}
	return cfg, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Peer is the node or client at the other end of a connection or session.
type Peer struct {
	Name string
	ID   message.NodeID
	Addr string // remote network address, as net.Conn.RemoteAddr
	// Kind is what the identity is, from its credential on the server; a
	// client sees its server as a PeerNode.
	Kind PeerKind
	// Relay is true if the identity may hand over messages of origins
	// other than its own (see Credential.Relay). Always true for a
	// PeerMember: a shared secret proves no identity to hold it to.
	Relay bool
}

// PeerKind is what an identity at the other end is.
type PeerKind uint8

// The kinds of identities.
const (
	// PeerMember proved the shared secret (or nothing, with none): its
	// name is a claim, not an identity. Treated as a node.
	PeerMember PeerKind = iota
	// PeerNode is a node with credentials of its own.
	PeerNode
	// PeerClient is a client with credentials of its own: it may publish
	// and subscribe, never open link or file sessions.
	PeerClient
)

// String returns "member", "node" or "client".
func (k PeerKind) String() string {
	switch k {
	case PeerMember:
		return "member"
	case PeerNode:
		return "node"
	case PeerClient:
		return "client"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Credential is what a node knows of one identity (Config.Credentials).
type Credential struct {
	// Secret is the identity's own secret. Nil means the identity proves
	// itself by a certificate only: a server accepts it only when the
	// name is Config.Certified.
	Secret []byte
	// Kind is PeerNode or PeerClient; PeerMember is taken as PeerNode.
	Kind PeerKind
	// Relay lets the identity hand over messages that other nodes made
	// (a hub relaying its plants). Without it, only messages of its own
	// origin are taken from it.
	Relay bool
}

// ConnStats counts a connection's traffic, headers included.
type ConnStats struct {
	FramesIn, FramesOut uint64
	BytesIn, BytesOut   uint64
	Sessions            int // open or waiting for Accept
	// Buffered is the bytes of Data received and not yet taken by Recv
	// (server side); BufferedPeak the most it ever was, at most
	// MaxConnBuffer unless one frame alone was larger; ReadPauses how
	// often the read loop stopped reading for want of room.
	Buffered, BufferedPeak int64
	ReadPauses             uint64
}

// RefuseStats count, for every server connection that shares them, the
// SessionCreates the package refused itself, before Accept saw them, for
// a bound: those past MaxSessions. A node gives one to all its
// connections (Config.RefuseStats) to export them.
type RefuseStats struct {
	OverLimit atomic.Uint64 // past MaxSessions open or waiting for Accept
}
