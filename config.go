package petrel

import (
	"log/slog"

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
	// Logger receives the node's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// AddressConfig declares one address on this node.
type AddressConfig struct {
	// Name of the address, without "@node".
	Name string
	// Role of the address on this node.
	Role address.Role
	// Queue is the consumer-side policy of a receive address.
	Queue queue.Policy
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
