package petrel

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// Identities: who may connect (Config.Peers), with which secret this node
// dials each neighbour (NodeConfig.Secret), and which node id each
// identity is bound to.
//
// A node identity is bound to the id it proves at its first connection
// that opens a link or file session (trust on first use) unless its peers
// entry pins one; a client's connection opens neither, so a client given
// a node's entry binds nothing. The bindings are
// kept in bindingsFile in the data directory, a JSON object of name to id
// written through a synced temporary file and a rename, so a crash leaves
// the old bindings or the new ones. An identity that proves another id than
// its own, or an id bound to another identity (or this node's own), is
// refused at the handshake: no identity can take over another's origin.
// A client identity without a pin makes a new id at every Dial: each id it
// proves is bound to it for a dedupe window after its last handshake (see
// clientBindings, identities_clients.go).

// bindingsFile holds the ids bound to identities, in the data directory.
const bindingsFile = "peer-ids.json"

// identities is the node's table of identities; safe for concurrent use.
type identities struct {
	self message.NodeID
	path string
	now  func() time.Time
	log  *slog.Logger

	mu      sync.Mutex
	peers   map[string]PeerConfig
	shared  []byte                    // the network's shared secret (Config.Secret); nil for none
	dial    map[string]string         // neighbours' secrets, by name
	bound   map[string]message.NodeID // node bindings, persisted; see bindingsFile
	clients *clientBindings           // persisted with them, in batches
	// Writing bindingsFile: each snapshot is numbered (gen) under mu, and
	// written under writeMu only if no later one was (written), so that a
	// batch of client bindings never overwrites a newer node binding.
	gen        uint64
	dirty      bool        // client bindings changed since the last snapshot
	flushTimer *time.Timer // a write of client bindings is due
	flushing   sync.WaitGroup
	closed     bool
	writeMu    sync.Mutex
	written    uint64
}

// newIdentities loads the bindings kept in dataDir.
func newIdentities(cfg Config, self message.NodeID) (*identities, error) {
	ids := &identities{
		self: self, path: filepath.Join(cfg.DataDir, bindingsFile), now: cfg.Store.Now, log: cfg.Logger,
		bound: map[string]message.NodeID{}, clients: newClientBindings(clientBindingTTL(cfg), maxClientBindings),
	}
	if ids.now == nil {
		ids.now = time.Now
	}
	if ids.log == nil {
		ids.log = slog.Default()
	}
	raw, err := os.ReadFile(ids.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read identity bindings: %w", err)
	default:
		if ids.bound, err = parseBindings(raw, ids.clients, ids.now()); err != nil {
			return nil, fmt.Errorf("read identity bindings from %s: %w (fix or remove the file; every identity is then bound again at its next connection)", ids.path, err)
		}
	}
	ids.set(cfg)
	return ids, nil
}

// set installs the peers, the shared secret and the neighbours' secrets
// of cfg.
func (ids *identities) set(cfg Config) {
	peers := map[string]PeerConfig{}
	for _, p := range cfg.Peers {
		peers[p.Name] = p
	}
	dial := map[string]string{}
	for _, nc := range cfg.Nodes {
		if nc.Secret != "" {
			dial[nc.Name] = nc.Secret
		}
	}
	var shared []byte
	if cfg.Secret != "" {
		shared = []byte(cfg.Secret)
	}
	ids.mu.Lock()
	ids.peers, ids.dial, ids.shared = peers, dial, shared
	ids.mu.Unlock()
}

// sharedSecret is the network's shared secret in force, nil for none.
// Unlike Node.sharedSecret, it may be read while a reload applies.
func (ids *identities) sharedSecret() []byte {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.shared
}

// credential is the listener's session.Config.Credentials: the peers
// entry of name.
func (ids *identities) credential(name string) (session.Credential, bool) {
	ids.mu.Lock()
	p, ok := ids.peers[name]
	ids.mu.Unlock()
	if !ok {
		return session.Credential{}, false
	}
	c := session.Credential{Kind: session.PeerNode, Relay: p.Relay}
	if p.Kind == PeerKindClient {
		c.Kind = session.PeerClient
	}
	if p.Secret != "" {
		c.Secret = []byte(p.Secret)
	}
	return c, true
}

// dialCredential is the dialer's session.Config.Credentials: the secret
// this node proves to the node it reached, if it has one for it.
func (ids *identities) dialCredential(name string) (session.Credential, bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if s, ok := ids.dial[name]; ok {
		return session.Credential{Secret: []byte(s)}, true
	}
	if p, ok := ids.peers[name]; ok && p.Secret != "" {
		return session.Credential{Secret: []byte(p.Secret)}, true
	}
	return session.Credential{}, false
}

// bind holds peer, which proved its credentials, to its id.
func (ids *identities) bind(peer session.Peer) error {
	if peer.Kind == session.PeerMember {
		return nil // the shared secret proves no identity to bind
	}
	if peer.ID == ids.self {
		return fmt.Errorf("%w: identity %q claims this node's own id %s", session.ErrAuth, peer.Name, peer.ID)
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	now := ids.now()
	if owner, ok := ids.ownerOf(peer.ID, peer.Name, now); ok {
		return fmt.Errorf("%w: identity %q claims id %s, which is bound to identity %q", session.ErrAuth, peer.Name, peer.ID, owner)
	}
	pin := ids.peers[peer.Name].ID
	if !pin.IsZero() && pin != peer.ID {
		return fmt.Errorf("%w: identity %q proved id %s, but its peers entry pins id %s; if that node was rebuilt, set its id: to the new id",
			session.ErrAuth, peer.Name, peer.ID, pin)
	}
	if pin.IsZero() && peer.Kind == session.PeerClient {
		ids.bindClient(peer.Name, peer.ID, now) // a client makes a new id at every Dial
		return nil
	}
	if !pin.IsZero() {
		// The pin decides; the binding follows it.
		if old, bound := ids.bound[peer.Name]; bound && old == peer.ID {
			return nil
		}
		return ids.save(peer.Name, peer.ID)
	}
	// A node identity is bound when it first opens a link or file
	// session (bindNode), not here: a connection with a node's
	// credentials may be a client's (petrel.Dial given a node's entry by
	// mistake), whose random id must never become the node's.
	return ids.checkBound(peer)
}

// checkBound refuses the node identity peer if it is bound to another id
// than the one it proved. ids.mu is held.
func (ids *identities) checkBound(peer session.Peer) error {
	if old, bound := ids.bound[peer.Name]; bound && old != peer.ID {
		return fmt.Errorf("%w: identity %q proved id %s, but it is bound to id %s since its first connection; if that node was rebuilt, pin the new id (id: in its peers entry) or remove %q from %s while this node is stopped",
			session.ErrAuth, peer.Name, peer.ID, old, peer.Name, ids.path)
	}
	return nil
}

// bindNode binds the node identity peer, not pinned, to the id it proved,
// on the first link or file session it opens: what only a node opens.
// A client's connection opens publish and subscribe sessions only, which
// a node identity is refused (see receiver's sessionAllowed), so it binds
// nothing. Later sessions find the binding made.
func (ids *identities) bindNode(peer session.Peer) error {
	if peer.Kind != session.PeerNode {
		return nil
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if p, ok := ids.peers[peer.Name]; !ok || !p.ID.IsZero() {
		return nil // pinned (checked at the handshake), or removed since
	}
	if err := ids.checkBound(peer); err != nil {
		return err
	}
	if _, bound := ids.bound[peer.Name]; bound {
		return nil
	}
	if owner, ok := ids.ownerOf(peer.ID, peer.Name, ids.now()); ok {
		return fmt.Errorf("%w: identity %q claims id %s, which is bound to identity %q", session.ErrAuth, peer.Name, peer.ID, owner)
	}
	return ids.save(peer.Name, peer.ID)
}

// revoked returns why peer, which proved its identity at a handshake,
// would not be admitted as it was under the peers in force: its entry is
// gone, names another kind, no longer lets it relay, or pins another id.
// The handshake copied what the entry granted into peer, so a connection
// keeps it until it is cut (see receiver.Rejudge). A shared-secret member
// proves no identity and is never revoked here.
func (ids *identities) revoked(peer session.Peer) error {
	if peer.Kind == session.PeerMember {
		return nil
	}
	ids.mu.Lock()
	p, ok := ids.peers[peer.Name]
	ids.mu.Unlock()
	was, is := PeerKindNode, PeerKindNode
	if peer.Kind == session.PeerClient {
		was = PeerKindClient
	}
	if p.Kind == PeerKindClient {
		is = PeerKindClient
	}
	switch {
	case !ok:
		return fmt.Errorf("identity %q was removed from peers", peer.Name)
	case was != is:
		return fmt.Errorf("identity %q connected as a %s, and its peers entry now makes it a %s", peer.Name, was, is)
	case peer.Relay && !p.Relay:
		return fmt.Errorf("identity %q connected as a relay, and its peers entry no longer has relay: true", peer.Name)
	case !p.ID.IsZero() && p.ID != peer.ID:
		return fmt.Errorf("identity %q proved id %s, and its peers entry now pins id %s", peer.Name, peer.ID, p.ID)
	}
	return nil
}

// nodeID returns the id the node identity name is pinned or bound to, if
// any: none for a shared-secret member, which proves no identity.
func (ids *identities) nodeID(name string) (message.NodeID, bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if pin := ids.peers[name].ID; !pin.IsZero() {
		return pin, true
	}
	id, ok := ids.bound[name]
	return id, ok
}

// ownerOf returns the identity other than name that id is bound or
// pinned to at now. A pin of name's own takes precedence over a client
// binding. ids.mu is held.
func (ids *identities) ownerOf(id message.NodeID, name string, now time.Time) (string, bool) {
	for n, p := range ids.peers {
		if n != name && p.ID == id {
			return n, true
		}
	}
	for n, b := range ids.bound {
		if n != name && b == id {
			// A binding replaced by another identity's pin is stale.
			if pin := ids.peers[n].ID; pin.IsZero() || pin == id {
				return n, true
			}
		}
	}
	if owner, ok := ids.clients.owner(id, now); ok && owner != name && ids.peers[name].ID != id {
		return owner, true
	}
	return "", false
}

// save binds name to id and writes the bindings, the client bindings
// with them. ids.mu is held.
func (ids *identities) save(name string, id message.NodeID) error {
	nodes := maps.Clone(ids.bound)
	nodes[name] = id
	data, gen, err := ids.snapshot(nodes)
	if err == nil {
		err = ids.write(data, gen)
	}
	if err != nil {
		ids.dirty = true
		return fmt.Errorf("bind identity %q to id %s: %w", name, id, err)
	}
	ids.bound[name] = id
	return nil
}

// applyIdentities installs cfg's peers and neighbours' secrets, and says
// so in r. Listing the first peers, or removing the last, switches the
// listener between the shared secret and per-identity credentials: that
// needs a restart, and the old peers stay in force until then. It
// returns the peers in force.
func (n *Node) applyIdentities(old, cfg Config, r *Reconfigured) []PeerConfig {
	if (len(old.Peers) > 0) != (len(cfg.Peers) > 0) {
		r.Restart = append(r.Restart, "peers")
		cfg.Peers = old.Peers
	} else if !slices.Equal(old.Peers, cfg.Peers) {
		r.Applied = append(r.Applied, "peers")
	}
	n.idents.set(cfg)
	return cfg.Peers
}

// validatePeers checks Config.Peers.
func (c Config) validatePeers() error {
	seen := map[string]bool{}
	pinned := map[message.NodeID]string{}
	mtls := c.TLS.ClientAuth == ClientAuthRequireAndVerify
	for i, p := range c.Peers {
		f := fmt.Sprintf("peers[%d]", i)
		if err := message.ValidName(p.Name); err != nil {
			return cfgErr(f+".name", err.Error(), err)
		}
		switch {
		case p.Name == c.Name:
			return cfgErr(f+".name", fmt.Sprintf("%q is this node itself", p.Name), nil)
		case seen[p.Name]:
			return cfgErr(f+".name", fmt.Sprintf("identity %q is listed twice", p.Name), nil)
		case p.Kind != "" && p.Kind != PeerKindNode && p.Kind != PeerKindClient:
			return cfgErr(f+".kind", fmt.Sprintf("%q: want node or client", p.Kind), nil)
		case p.Kind == PeerKindClient && p.Relay:
			return cfgErr(f+".relay", "a client identity cannot relay; only nodes can", nil)
		case p.Secret == "" && !mtls:
			return cfgErr(f+".secret", fmt.Sprintf("identity %q has no secret: give it one (secret_file), or require client certificates (tls.client_auth: require_and_verify)", p.Name), nil)
		}
		seen[p.Name] = true
		if p.ID.IsZero() {
			continue
		}
		if other, ok := pinned[p.ID]; ok {
			return cfgErr(f+".id", fmt.Sprintf("id %s is pinned to identity %q already", p.ID, other), nil)
		}
		pinned[p.ID] = p.Name
	}
	return nil
}
