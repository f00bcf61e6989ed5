package petrel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/reload"
)

// Reconfigured says what a Reconfigure did.
type Reconfigured struct {
	// Applied lists the settings that changed and now run: "addresses",
	// "nodes", "routes", "secret", "discovery", "auto_create", "access",
	// "outboxes".
	Applied []string
	// Restart lists the settings that changed but were not applied, because
	// they need a restart (the listen address, the name, the data
	// directory, the store, limits, link tuning, max_auto_queues, files,
	// admin, tls), by their keys in the configuration file. Nothing of
	// them was applied: a change is never half-applied.
	Restart []string
}

// Reconfigure applies a new configuration to the running node, as far as
// it can live: addresses and their roles and policies, neighbours and their
// connectors, routes, the secret, discovery, auto-creation and the access
// rules. Links the change does not touch stay up; a sender whose next hop
// changed reconnects through the new one, and one whose neighbour's
// connector changed redials. A config that does not validate is refused
// and nothing changes.
//
// A change is applied whole or not at all. What can be checked before
// (an outbox folder that does not exist yet, a discovery announcement
// without an address to give) refuses it with nothing changed. What fails
// while it is applied (a discovery socket, a queue's store) rolls back the
// sections applied before, so that the node runs its previous
// configuration again; the error says so, and a later call with the same
// cfg tries again.
func (n *Node) Reconfigure(ctx context.Context, cfg Config) (Reconfigured, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Reconfigured{}, err
	}
	n.reconfMu.Lock()
	defer n.reconfMu.Unlock()
	old := n.current
	if err := n.checkReconfigure(old, cfg); err != nil {
		return Reconfigured{}, err
	}
	r, applied, err := n.reconfigure(ctx, old, cfg)
	if err != nil {
		// Applying old over what was applied undoes it: each section
		// compares with applied, and those not reached are as old has
		// them already.
		if _, _, rerr := n.reconfigure(context.WithoutCancel(ctx), applied, old); rerr != nil {
			// Returned, not logged: the caller logs a refused change.
			return Reconfigured{}, fmt.Errorf("%w (and rolling back failed, so the node may run part of it: %v)", err, rerr)
		}
		return Reconfigured{}, fmt.Errorf("%w (nothing applied)", err)
	}
	n.current = keepRestartOnly(applied, old)
	n.log.Info("configuration applied", "applied", r.Applied, "needs_restart", r.Restart)
	return r, nil
}

// checkReconfigure finds what would make applying cfg over old fail,
// before anything is applied.
func (n *Node) checkReconfigure(old, cfg Config) error {
	for _, c := range cfg.Outboxes {
		if slices.Contains(old.Outboxes, c) {
			continue // running already
		}
		// Folders are made by the operator, often after the edit that
		// names them: the edit waits for the folder.
		if fi, err := os.Stat(c.Dir); err != nil {
			return fmt.Errorf("apply outboxes: outbox %s: %w (nothing applied)", c.Dir, err)
		} else if !fi.IsDir() {
			return fmt.Errorf("apply outboxes: outbox %s: not a directory (nothing applied)", c.Dir)
		}
	}
	if d := cfg.Discovery; d.Enabled && (d != old.Discovery || old.Secret != cfg.Secret) {
		addr, err := n.advertised(d)
		if err == nil && addr != "" {
			_, err = address.ParseConnectors(addr)
		}
		if err != nil {
			return fmt.Errorf("apply discovery: %w (nothing applied)", err)
		}
	}
	return nil
}

// reconfigure applies what differs from old to cfg, section by section. It
// returns what to roll back from: cfg, with the peers in force. Sections
// after one that failed are still old's, and applying old over them again
// changes nothing; the peers must be old's until applied, as a switch of
// the listener's mode is judged from them.
func (n *Node) reconfigure(ctx context.Context, old, cfg Config) (r Reconfigured, applied Config, err error) {
	applied = cfg
	applied.Peers = old.Peers
	r.Restart = restartNeeded(old, cfg)
	if !slices.Equal(old.Nodes, cfg.Nodes) || !slices.Equal(old.Routes, cfg.Routes) {
		n.applyRouting(old, cfg)
		r.Applied = append(r.Applied, changed(old.Nodes, cfg.Nodes, reload.Nodes)...)
		r.Applied = append(r.Applied, changed(old.Routes, cfg.Routes, reload.Routes)...)
	}
	if old.Secret != cfg.Secret {
		n.applySecret(cfg.Secret)
		r.Applied = append(r.Applied, reload.Secret)
	}
	if old.Discovery != cfg.Discovery || old.Secret != cfg.Secret && cfg.Discovery.Enabled {
		// Announcements are signed with the secret: both restart discovery.
		n.stopDiscovery()
		if err := n.startDiscovery(cfg.Discovery, cfg.Secret); err != nil {
			return r, applied, fmt.Errorf("apply discovery: %w", err)
		}
		if old.Discovery != cfg.Discovery {
			r.Applied = append(r.Applied, reload.Discovery)
		}
	}
	if old.NoAutoCreate != cfg.NoAutoCreate {
		n.noAutoCreate.Store(cfg.NoAutoCreate)
		r.Applied = append(r.Applied, reload.AutoCreate)
	}
	if !reflect.DeepEqual(old.Addresses, cfg.Addresses) {
		if err := n.applyAddresses(ctx, cfg.Addresses); err != nil {
			return r, applied, fmt.Errorf("apply addresses: %w", err)
		}
		r.Applied = append(r.Applied, reload.Addresses)
	}
	if !slices.Equal(old.Outboxes, cfg.Outboxes) {
		if err := n.applyOutboxes(cfg.Outboxes); err != nil {
			return r, applied, fmt.Errorf("apply outboxes: %w", err)
		}
		r.Applied = append(r.Applied, reload.Outboxes)
	}
	// Last, as nothing after them can fail: rules or peers swapped in for
	// a change that is then rolled back would be in force, and cut
	// sessions by, for a moment.
	cfg.Peers = n.applyIdentities(old, cfg, &r)
	applied.Peers = cfg.Peers
	n.redialChangedSecrets(old, cfg)
	if !reflect.DeepEqual(old.Access, cfg.Access) {
		n.access.set(cfg.Access)
		r.Applied = append(r.Applied, reload.Access)
	}
	// A changed secret rejudges too: a connection that proved the old
	// one is closed, and must prove the new one to come back.
	if slices.Contains(r.Applied, reload.Access) || slices.Contains(r.Applied, reload.Peers) || slices.Contains(r.Applied, reload.Secret) {
		n.rejudgeSessions()
	}
	return r, cfg, nil
}

func changed[T comparable](a, b []T, name string) []string {
	if slices.Equal(a, b) {
		return nil
	}
	return []string{name}
}

// restartNeeded names the changed settings that only a restart applies,
// by their keys in the configuration file (the table of internal/reload,
// which the file's diff reads too).
func restartNeeded(old, cfg Config) []string {
	o, c := reflect.ValueOf(withoutHooks(old)), reflect.ValueOf(withoutHooks(cfg))
	var out []string
	for _, r := range reload.Rules {
		if r.Live() || r.Field == "" || r.Key == "" {
			continue
		}
		if !reflect.DeepEqual(o.FieldByName(r.Field).Interface(), c.FieldByName(r.Field).Interface()) {
			out = append(out, r.Key)
		}
	}
	return out
}

// keepRestartOnly returns next with every setting that only a restart
// applies as old has it: what could not be applied stays as it was in the
// running config, so that the next comparison still sees it pending.
func keepRestartOnly(next, old Config) Config {
	nv, ov := reflect.ValueOf(&next).Elem(), reflect.ValueOf(old)
	for _, r := range reload.Rules {
		if !r.Live() && r.Field != "" {
			nv.FieldByName(r.Field).Set(ov.FieldByName(r.Field))
		}
	}
	return next
}

// withoutHooks returns c without what never compares equal or is no
// setting: the store's hooks and logger.
func withoutHooks(c Config) Config {
	c.Store.Logger, c.Store.Now, c.Store.OnCommit = nil, nil, nil
	return c
}

// applyRouting installs new neighbours and routes. Connections to a
// neighbour whose connector changed, or that is gone, are dropped so that
// they redial; senders whose next hop changed reconnect.
func (n *Node) applyRouting(old, cfg Config) {
	dir, routes := buildRouting(cfg)
	n.dir.SetStatic(dir.Entries())
	n.routes.Store(routes)
	before := map[string]string{}
	for _, nc := range old.Nodes {
		before[nc.Name] = nc.Connector
	}
	after := map[string]string{}
	for _, nc := range cfg.Nodes {
		after[nc.Name] = nc.Connector
	}
	for name, conn := range before {
		if after[name] != conn {
			n.mgr.Pool().Drop(name)
		}
	}
	n.mgr.Rehop()
}

// redialChangedSecrets drops this node's connections to each neighbour
// whose secret, the one this node proves when it dials it (dialSecret),
// differs between old and cfg, once cfg's secrets are in force: the
// neighbour admitted them on the old secret, which the change may have
// retired. Their senders redial with the new one. Neighbours removed
// from nodes were dropped with the routing (applyRouting); those left
// keep their connections.
func (n *Node) redialChangedSecrets(old, cfg Config) {
	names := map[string]bool{}
	for _, nc := range cfg.Nodes {
		names[nc.Name] = true
	}
	pool := n.mgr.Pool()
	for name := range pool.Connections() {
		names[name] = true // a node discovery found, dialled with the shared secret
	}
	for name := range names {
		if dialSecret(old, name) != dialSecret(cfg, name) {
			n.log.Info("link closed to redial: the secret this node proves to the neighbour changed", slog.String(logkey.Node, name))
			pool.Drop(name)
		}
	}
}

// dialSecret is the secret this node proves when it dials node under cfg,
// as the dial finds it (identities.dialCredential, then the pool's shared
// secret): the neighbour's own (nodes: secret), else its peers entry's,
// else the shared secret.
func dialSecret(cfg Config, node string) string {
	for _, nc := range cfg.Nodes {
		if nc.Name == node && nc.Secret != "" {
			return nc.Secret
		}
	}
	for _, p := range cfg.Peers {
		if p.Name == node && p.Secret != "" {
			return p.Secret
		}
	}
	return cfg.Secret
}

func (n *Node) applySecret(secret string) {
	var b []byte
	if secret != "" {
		b = []byte(secret)
	}
	n.mgr.Pool().SetSecret(b)
	if n.srv != nil {
		n.srv.SetSecret(b)
	}
}

// applyAddresses installs a new set of addresses: new receive addresses
// get their queue and policy, new send addresses their queue and sender.
// A removed address keeps its queue and what is in it.
func (n *Node) applyAddresses(ctx context.Context, addrs []AddressConfig) error {
	m := map[string]AddressConfig{}
	for _, a := range addrs {
		if a.Role == 0 {
			a.Role = address.RoleReceive
		}
		m[a.Name] = a
	}
	n.mu.Lock()
	n.addresses = m
	n.mu.Unlock()
	for _, a := range m {
		switch a.Role {
		case address.RoleReceive:
			q, err := n.receiveQueue(ctx, a.Name)
			if err != nil {
				return err
			}
			q.SetPolicy(a.Queue)
		case address.RoleSend:
			if _, err := n.sendQueue(ctx, a.Name, a.Node); err != nil {
				return err
			}
		}
	}
	return nil
}
