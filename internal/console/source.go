package console

import (
	"context"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/sender"
)

// Page is a page of a queue's messages, as Source.Browse reads it.
type Page struct {
	Messages []adminapi.Message
	// Keys[i] is where Messages[i] stands in the delivery order: the
	// admin API's after (adminapi.ParamAfter) for the messages past it.
	Keys []string
	// Cut says the page stopped before its limit, at the byte budget.
	Cut bool
	// Next is the key the next page starts after, "" when the queue held
	// no message past the page.
	Next string
}

// Source is what the console reads of a node. Its methods are called from
// the sampler and from request handlers at once.
type Source interface {
	// Snapshot returns the node's figures now.
	Snapshot() Snapshot
	// Browse returns up to limit messages of the queue called name after
	// the message of key after ("" from the first), in delivery order,
	// consuming nothing, within the admin API's byte budget
	// (adminapi.MaxAnswerBytes).
	Browse(ctx context.Context, name, after string, limit int) (Page, error)
	// Oldest returns when the oldest message of the queue called name was
	// made, false if the queue is empty.
	Oldest(ctx context.Context, name string) (time.Time, bool)
	// DeadLetterQueue returns the name of the queue that the queue called
	// name dead-letters into, as petrel dlq finds it: "" while that queue
	// does not exist, name itself for a dead-letter queue.
	DeadLetterQueue(name string) string
}

// Snapshot is a node's state at one moment, as the pages show it.
type Snapshot struct {
	Node, ID, DataDir, Listen string
	Version                   string
	Started                   time.Time
	Links                     []sender.Status
	Queues                    []queue.Stats
	Subscriptions             []adminapi.Subscription
	// Receiving are the files this node receives, and those paused.
	Receiving []receiver.TransferStatus
	// Finished are the files sent from this node that ended, newest last.
	Finished []Finished
	// Received are the files received that ended in the last hour, taken
	// or failed, newest last.
	Received []receiver.TransferEnd
	// Nodes are the directory: neighbours of the configuration and
	// discovered nodes.
	Nodes  []Peer
	Routes []Route
	// RelayAddresses are the addresses this node relays (role relay): a
	// send queue "name@node" of one of them is a relay queue.
	RelayAddresses []string
	// DeadLetterOwners are the queues that an address names as its
	// dead_letter, each with the first such address by name: the address
	// that petrel dlq and /api/dlq/{addr} take for them. A queue neither
	// here nor named "<addr>.dlq" holds no dead letters.
	DeadLetterOwners map[string]string
	Config           Config
	// DiscoveryEnabled says whether the node announces and listens.
	DiscoveryEnabled bool
	// StoreBytes is the size of the store's files; DiskFree the space
	// left on the data directory's file system, -1 if unknown.
	StoreBytes, DiskFree int64
}

// Finished is how a file sent from the node ended.
type Finished struct {
	adminapi.FileProgress
	At time.Time
}

// Peer is one node of the directory.
type Peer struct {
	Name, ID, Connectors, Source string
	LastSeen                     time.Time
}

// Route says that traffic for Node goes through Via.
type Route struct{ Node, Via string }

// Config says which configuration the node runs.
type Config struct {
	Source       string
	Version      int
	LoadedAt     time.Time
	LastError    string
	NeedsRestart []string
}
