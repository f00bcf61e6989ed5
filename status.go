package petrel

import (
	"context"
	"time"
)

// Status is everything `petrel stat` shows about a node.
type Status struct {
	Node     string        `json:"node"`
	ID       string        `json:"id"`
	DataDir  string        `json:"data_dir"`
	Listen   string        `json:"listen,omitempty"`
	Started  time.Time     `json:"started"`
	Links    []LinkStatus  `json:"links"`
	Queues   []QueueStats  `json:"queues"`
	Receiver ReceiverStats `json:"receiver"`
	// Transfers are the files being received, and those paused.
	Transfers []TransferStatus `json:"transfers,omitempty"`
	// Outboxes are the folders watched, and whether each is there.
	Outboxes  []OutboxStatus   `json:"outboxes,omitempty"`
	Nodes     []DirectoryEntry `json:"nodes"`
	Discovery DiscoveryStats   `json:"discovery"`
	Config    ConfigStatus     `json:"config"`
	// Access is the access rules in force and what they denied.
	Access AccessStats `json:"access"`
	// HA is the node's part in a live/backup pair; nil for a standalone
	// node.
	HA *HAStatus `json:"ha,omitempty"`
	// Topics is the topic spaces, the subscriptions and the interest
	// forwarding counters.
	Topics TopicsStatus `json:"topics"`
	// MQTT is the MQTT listener's clients, sessions and traffic; nil when
	// it is off.
	MQTT *MQTTStats `json:"mqtt,omitempty"`
}

// DirectoryEntry is one node this node knows, for `petrel nodes`.
type DirectoryEntry struct {
	Name       string    `json:"name"`
	ID         string    `json:"id,omitempty"`
	Connectors string    `json:"connectors"`
	Source     string    `json:"source"`
	LastSeen   time.Time `json:"last_seen,omitzero"`
}

// directoryEntries lists the directory, discovered entries hidden behind a
// static one included.
func (n *Node) directoryEntries() []DirectoryEntry {
	all := n.dir.All()
	out := make([]DirectoryEntry, 0, len(all))
	for _, e := range all {
		d := DirectoryEntry{Name: e.Name, Connectors: e.Connectors.String(), Source: e.Source.String(), LastSeen: e.LastSeen}
		if !e.ID.IsZero() {
			d.ID = e.ID.String()
		}
		out = append(out, d)
	}
	return out
}

// ConfigStatus says which configuration a node runs.
type ConfigStatus struct {
	// Source is the file the configuration came from, "" for none.
	Source string `json:"source,omitempty"`
	// Version counts the configurations loaded: 1 at start, then one per
	// reload that changed something.
	Version int `json:"version"`
	// LoadedAt is when the running configuration was loaded.
	LoadedAt time.Time `json:"loaded_at"`
	// LastError is why the last reload was refused, "" if it was not: the
	// file on disk is then not what runs.
	LastError string `json:"last_error,omitempty"`
	// NeedsRestart lists changed settings that only a restart applies.
	NeedsRestart []string `json:"needs_restart,omitempty"`
}

// SetConfigStatus records the state of the configuration file, for
// Status; the daemon's file watcher calls it.
func (n *Node) SetConfigStatus(c ConfigStatus) {
	n.mu.Lock()
	n.confStatus = c
	n.mu.Unlock()
}

func (n *Node) configStatus() ConfigStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.confStatus.Version == 0 {
		return ConfigStatus{Source: n.cfg.ConfigSource, Version: 1, LoadedAt: n.started}
	}
	return n.confStatus
}

// Status returns the node's state: links, queues, receiver counters.
func (n *Node) Status() Status {
	var ha *HAStatus
	if st, ok := n.HA(); ok {
		ha = &st
	}
	return Status{
		HA: ha, Node: n.cfg.Name, ID: n.id.String(), DataDir: n.cfg.DataDir, Listen: n.ListenAddr(),
		Started: n.started, Links: n.Links(), Queues: n.QueueStats(), Receiver: n.ReceiverStats(),
		Nodes: n.directoryEntries(), Discovery: n.discoveryStats(),
		Config: n.configStatus(), Transfers: n.Transfers(), Outboxes: n.outboxStatus(), Access: n.AccessStats(),
		Topics: n.topicsStatus(),
		MQTT:   n.mqttStats(),
	}
}

// startAdmin serves the admin endpoints over the unix socket in the data
// directory (adminServer.listenSocket).
func (n *Node) startAdmin() error { return n.admin.listenSocket(n.cfg.DataDir) }

func (n *Node) stopAdmin(ctx context.Context) { n.admin.stopSocket(ctx) }

// startAdminHTTP opens the admin TCP listener, if one is configured, and
// marks the node ready: every other component started before it.
func (n *Node) startAdminHTTP(context.Context) error { return n.admin.listenTCP(n.cfg.Admin) }

// stopAdminHTTP marks the node not ready and closes the TCP listener.
func (n *Node) stopAdminHTTP(ctx context.Context) error {
	n.admin.stopTCP(ctx)
	return nil
}
