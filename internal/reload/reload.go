// Package reload is the one table of a node's settings that says, for
// each, whether a change to it applies live or takes a restart. The node's
// Reconfigure (package petrel) reads it to know which fields of a new
// Config it keeps as they were and reports; the configuration file's diff
// (package conf) reads it to know which keys of the file it reports as
// changed sections and which as needing a restart. Before this table the
// two held their own lists, kept matching by hand.
//
// It is a leaf: it imports nothing, so that both the root package and conf
// (which imports the root) may import it.
package reload

// The sections a live change is applied and reported by: the names of
// conf.Diff.Changed and of petrel.Reconfigured.Applied.
const (
	Secret     = "secret"
	Nodes      = "nodes"
	Routes     = "routes"
	AutoCreate = "auto_create"
	Addresses  = "addresses"
	Log        = "log"
	Discovery  = "discovery"
	Outboxes   = "outboxes"
	Access     = "access"
	Peers      = "peers"
)

// Rule is one setting and how a change to it takes effect.
type Rule struct {
	// Key is the setting's key path in the configuration file ("listen",
	// "node.name", "store"); "" for a field of petrel.Config that the file
	// does not set. A restart key covers the keys under it.
	Key string
	// Field is the name of the petrel.Config field that holds it; "" for
	// a key of the file that the node's Config does not hold as such
	// (secret_file is read into Secret; the log is the daemon's).
	Field string
	// Section is the section a live change is applied as, one of the
	// constants above; "" for a setting that only a restart applies. The
	// node keeps such a setting as it opened with it until it restarts,
	// and reports its key as needing a restart.
	Section string
}

// Live reports whether a change to the setting applies without a restart.
func (r Rule) Live() bool { return r.Section != "" }

// Rules is every setting. The root package checks that each field of
// petrel.Config has a rule, conf that each key of its File has one, so
// that a setting added without a decision fails a test.
var Rules = []Rule{
	// The name and unique id are in every session the node has open; the
	// data directory holds the store and the id, opened once.
	{Key: "node.name", Field: "Name"},
	{Key: "node.data_dir", Field: "DataDir"},
	// The listener is bound at start; rebinding it would drop every
	// inbound link at once.
	{Key: "listen", Field: "Listen"},
	// Sync mode, caps, dedupe and prefetch are set on the open database
	// and its queues.
	{Key: "store", Field: "Store"},
	// The log handler is built once and shared by every component; its
	// level can be a slog.LevelVar, its format cannot change under it.
	{Key: "log.format"},
	{Key: "log.level", Section: Log},
	// The logger an embedder gives is the node's for its life. Neither it
	// nor ConfigSource is a key of the file: a new one is neither taken
	// nor reported.
	{Field: "Logger"},
	// Where the configuration came from is only shown, as the node opened.
	{Field: "ConfigSource"},
	// Interceptors are application code wired in at start, into every
	// path; a reload keeps the chain the node opened with.
	{Field: "Interceptors"},
	// The admin listener is bound at start, like listen, and its token
	// file read then.
	{Key: "admin", Field: "Admin"},
	// The node restarts its announcer and listener with the new settings.
	{Key: "discovery", Field: "Discovery", Section: Discovery},
	// New handshakes use the new secret; links that are up stay up.
	{Key: "secret", Field: "Secret", Section: Secret},
	{Key: "secret_file", Section: Secret},
	// Links that a change of neighbours or routes does not touch stay up.
	{Key: "nodes", Field: "Nodes", Section: Nodes},
	{Key: "routes", Field: "Routes", Section: Routes},
	// Sessions, senders and the receiver take their tuning and limits when
	// they are built; swapping them under running links is not built yet.
	{Key: "link", Field: "Link"},
	{Key: "limits", Field: "Limits"},
	{Key: "auto_create", Field: "NoAutoCreate", Section: AutoCreate},
	// The bound is read when a queue is about to be made; the node takes
	// it at start, like link's bounds.
	{Key: "max_auto_queues", Field: "MaxAutoQueues"},
	{Key: "max_subscriptions_per_identity", Field: "MaxSubscriptionsPerIdentity"},
	{Key: "addresses", Field: "Addresses", Section: Addresses},
	// Subscriptions are checked against the spaces when they are made,
	// and a name's being a topic decided where its messages went: a
	// change applies at the next start.
	{Key: "topics", Field: "Topics"},
	// The topic janitor takes the grace when it starts, with the node.
	{Key: "topic_interest_grace", Field: "TopicInterestGrace"},
	// Read as each publish is forwarded, from the configuration the node
	// opened with.
	{Key: "topic_forward_max_queued", Field: "TopicForwardMaxQueued"},
	{Key: "topic_forward_overflow", Field: "TopicForwardOverflow"},
	// The MQTT listeners are bound at start, as listen is, and their
	// clients' sessions hang on them.
	{Key: "mqtt", Field: "MQTT"},
	// Removed outboxes stop being watched, new ones start.
	{Key: "outboxes", Field: "Outboxes", Section: Outboxes},
	// The spool and chunk settings are read by the receiver and the
	// senders when they are built, like link.
	{Key: "files", Field: "Files"},
	// Certificates and keys are read once, when the node opens; the
	// listener's TLS mode is its mode for its life.
	{Key: "tls", Field: "TLS"},
	// The rules are swapped whole; the next message or client request is
	// judged by the new ones.
	{Key: "access", Field: "Access", Section: Access},
	// The table of identities is swapped whole, like the access rules;
	// listing the first or removing the last switches the listener's
	// mode, which the node reports as needing a restart.
	{Key: "peers", Field: "Peers", Section: Peers},
	// The role decides how the node took its data directory's lock, before
	// the store opened; the lock file is held for the process's life.
	{Key: "ha", Field: "HA"},
}
