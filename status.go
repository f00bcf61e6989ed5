package petrel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	Nodes     []DirectoryEntry `json:"nodes"`
	Discovery DiscoveryStats   `json:"discovery"`
	Config    ConfigStatus     `json:"config"`
	// Access is the access rules in force and what they denied.
	Access AccessStats `json:"access"`
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
	return Status{
		Node: n.cfg.Name, ID: n.id.String(), DataDir: n.cfg.DataDir, Listen: n.ListenAddr(),
		Started: n.started, Links: n.Links(), Queues: n.QueueStats(), Receiver: n.ReceiverStats(),
		Nodes: n.directoryEntries(), Discovery: n.discoveryStats(),
		Config: n.configStatus(), Transfers: n.Transfers(), Access: n.AccessStats(),
	}
}

// AdminSocket is the name of the admin socket in a node's data directory.
// `petrel stat` reads the node's status through it.
const AdminSocket = "petrel.sock"

// startAdmin serves the admin endpoints (see adminHandler) over a unix
// socket in the node's data directory. The directory is 0700 and the
// socket 0600, so only the node's user (and root) reach it; it asks no
// token, and its POST /api/files reads any file that user can read.
func (n *Node) startAdmin() error {
	path := filepath.Join(n.cfg.DataDir, AdminSocket)
	// A socket left by a crashed process would make Listen fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("admin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	// The directory already keeps others out; the mode says the same of
	// the socket itself, whatever the umask.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("admin socket: %w", err)
	}
	h := requireJSON(n.adminHandler(adminScope{}), n.adminRefused)
	n.admin = n.serveAdmin(ln, h, "admin socket")
	return nil
}

func (n *Node) stopAdmin(ctx context.Context) { n.admin.stop(ctx) }

// ReadStatus asks the node whose data directory is dir for its status,
// through its admin socket.
func ReadStatus(ctx context.Context, dir string) (Status, error) {
	path := filepath.Join(dir, AdminSocket)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://petrel/status", nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("no node answers on %s (is it running with this data directory?): %w", path, err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("read status from %s: %w", path, err)
	}
	return st, nil
}
