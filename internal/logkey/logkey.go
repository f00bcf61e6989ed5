// Package logkey declares the attribute keys of Petrel's structured logs,
// once for every package, so that one thing is logged under one key
// wherever it is logged ("error", never "err" in one place and "error" in
// another), and a log search finds it everywhere.
//
// It is a leaf: it imports nothing, and every package that logs may
// import it.
package logkey

// Keys shared by several packages.
const (
	// Component names the part of the node that logs: "node", "sender",
	// "receiver", "store", ...
	Component = "component"
	Error     = "error"
	// Peer is the name of the node or client at the other end of a link.
	Peer = "peer"
	// Node is a node's name; NodeID its unique id.
	Node   = "node"
	NodeID = "node_id"
	// Address is a Petrel address (name or name@node); Addr a network
	// address (host:port).
	Address = "address"
	Addr    = "addr"
	Queue   = "queue"
	Session = "session"
	Path    = "path"
	File    = "file"
	// ID is the identifier of the thing logged: a transfer, a message.
	ID     = "id"
	Reason = "reason"
	Origin = "origin"
	To     = "to"
	Hop    = "hop"
	Size   = "size"
)

// Keys of the file transfer.
const (
	Spool  = "spool"
	Outbox = "outbox"
	Offset = "offset"
)

// Keys of discovery.
const (
	Group = "group"
	From  = "from"
)

// Keys of configuration reloads.
const (
	Version = "version"
	Changed = "changed"
	Restart = "restart"
)
