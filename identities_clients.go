package petrel

import (
	"container/list"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/prometheus/client_golang/prometheus"
)

// Client bindings: the ids a client identity proved, each held to it for
// a while.
//
// A client without a pinned id makes a new random id at every Dial, so it
// cannot be bound to one id for good as a node is. Yet its id is the
// origin of its messages, seen by whoever consumes them: another identity
// that proved it could store the client's future (origin, id) pairs first
// and have its real messages dropped as duplicates. So every id a client
// identity proves at a handshake is bound to that identity until
// clientBindingTTL has passed since the last handshake that proved it: as
// long as the dedupe window remembers (origin, id) pairs of that origin,
// so a poisoned pair could still do harm, and at least a day. A client that
// reconnects with its id refreshes the binding.
//
// The bindings are bounded (maxClientBindings): past the bound, the one
// that would expire first goes, and is counted. They are kept with the
// node bindings in bindingsFile, but written at most once per
// clientFlushEvery, and when the node stops, rather than at every Dial: a
// crash can lose the last second's client bindings. That only leaves those
// ids unprotected until their clients reconnect; it never refuses a
// legitimate client.

// Bounds of the client bindings.
const (
	// minClientBindingTTL is the least time a client's id stays bound after
	// its last handshake, whatever the dedupe window.
	minClientBindingTTL = 24 * time.Hour
	// maxClientBindings caps the client bindings held; the one that would
	// expire first goes past it.
	maxClientBindings = 100_000
	// clientFlushEvery is how often, at most, client bindings are written.
	clientFlushEvery = time.Second
)

// clientBindingTTL is how long a client's id stays bound after its last
// handshake: the store's dedupe window, at least minClientBindingTTL.
func clientBindingTTL(cfg Config) time.Duration {
	return max(cfg.Store.DedupeWindow, minClientBindingTTL)
}

// clientBinding holds id to the client identity name since seen, its last
// handshake.
type clientBinding struct {
	id   message.NodeID
	name string
	seen time.Time
}

// clientBindings are the ids bound to client identities, oldest
// handshake first. Not safe for concurrent use: identities.mu guards it.
type clientBindings struct {
	ttl     time.Duration
	max     int
	byID    map[message.NodeID]*list.Element // of *clientBinding
	order   list.List                        // oldest seen first
	evicted int64                            // bindings dropped for the cap
}

func newClientBindings(ttl time.Duration, maxBindings int) *clientBindings {
	return &clientBindings{ttl: ttl, max: maxBindings, byID: map[message.NodeID]*list.Element{}}
}

// owner returns the identity id is bound to at now, if any.
func (c *clientBindings) owner(id message.NodeID, now time.Time) (string, bool) {
	e, ok := c.byID[id]
	if !ok {
		return "", false
	}
	b := e.Value.(*clientBinding)
	if now.Sub(b.seen) >= c.ttl {
		return "", false
	}
	return b.name, true
}

// touch binds id to name as of now, or refreshes the binding. The caller
// checked that id is no other identity's.
func (c *clientBindings) touch(id message.NodeID, name string, now time.Time) {
	c.expire(now)
	if e, ok := c.byID[id]; ok {
		b := e.Value.(*clientBinding)
		b.name, b.seen = name, now
		c.order.MoveToBack(e)
		return
	}
	for c.order.Len() >= c.max {
		c.remove(c.order.Front())
		c.evicted++
	}
	c.byID[id] = c.order.PushBack(&clientBinding{id: id, name: name, seen: now})
}

// expire drops the bindings whose time is up at now.
func (c *clientBindings) expire(now time.Time) {
	for e := c.order.Front(); e != nil && now.Sub(e.Value.(*clientBinding).seen) >= c.ttl; e = c.order.Front() {
		c.remove(e)
	}
}

func (c *clientBindings) remove(e *list.Element) {
	delete(c.byID, c.order.Remove(e).(*clientBinding).id)
}

// clientJSON is a client binding in bindingsFile, keyed by the id's hex.
type clientJSON struct {
	Identity string    `json:"identity"`
	Seen     time.Time `json:"seen"`
}

// bindingsJSON is bindingsFile: the node identities' ids by name, and the
// client bindings by id. A file of the first format, a flat object of name
// to id, holds node bindings only.
type bindingsJSON struct {
	Nodes   map[string]string     `json:"nodes"`
	Clients map[string]clientJSON `json:"clients,omitempty"`
}

// parseBindings decodes bindingsFile into the node bindings and the client
// bindings still in force at now, added to clients oldest first.
func parseBindings(raw []byte, clients *clientBindings, now time.Time) (map[string]message.NodeID, error) {
	var f bindingsJSON
	if err := json.Unmarshal(raw, &f.Nodes); err != nil {
		f.Nodes = nil
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, err
		}
	}
	nodes := make(map[string]message.NodeID, len(f.Nodes))
	for name, hex := range f.Nodes {
		id, err := message.ParseNodeID(hex)
		if err != nil {
			return nil, fmt.Errorf("identity %q: %w", name, err)
		}
		nodes[name] = id
	}
	bs := make([]clientBinding, 0, len(f.Clients))
	for hex, c := range f.Clients {
		id, err := message.ParseNodeID(hex)
		if err != nil {
			return nil, fmt.Errorf("client binding of identity %q: %w", c.Identity, err)
		}
		if err := message.ValidName(c.Identity); err != nil {
			return nil, fmt.Errorf("client binding of id %s: %w", hex, err)
		}
		bs = append(bs, clientBinding{id: id, name: c.Identity, seen: c.Seen})
	}
	slices.SortFunc(bs, func(a, b clientBinding) int { return a.seen.Compare(b.seen) })
	for _, b := range bs {
		if now.Sub(b.seen) < clients.ttl {
			clients.touch(b.id, b.name, b.seen)
		}
	}
	return nodes, nil
}

// snapshot encodes the bindings for bindingsFile, with nodes in place of
// the node bindings, and numbers the snapshot. ids.mu is held.
func (ids *identities) snapshot(nodes map[string]message.NodeID) ([]byte, uint64, error) {
	f := bindingsJSON{Nodes: make(map[string]string, len(nodes)), Clients: make(map[string]clientJSON, ids.clients.order.Len())}
	for name, id := range nodes {
		f.Nodes[name] = id.String()
	}
	for e := ids.clients.order.Front(); e != nil; e = e.Next() {
		b := e.Value.(*clientBinding)
		f.Clients[b.id.String()] = clientJSON{Identity: b.name, Seen: b.seen.UTC()}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, 0, err
	}
	ids.gen++
	ids.dirty = false
	return append(data, '\n'), ids.gen, nil
}

// write puts snapshot gen on disk, unless a later one is there already.
// It may run without ids.mu.
func (ids *identities) write(data []byte, gen uint64) error {
	ids.writeMu.Lock()
	defer ids.writeMu.Unlock()
	if gen <= ids.written {
		return nil
	}
	if err := writeFileAtomic(ids.path, data); err != nil {
		return err
	}
	ids.written = gen
	return nil
}

// bindClient binds id to the client identity name as of now, and has the
// bindings written within clientFlushEvery. ids.mu is held.
func (ids *identities) bindClient(name string, id message.NodeID, now time.Time) {
	ids.clients.touch(id, name, now)
	ids.dirty = true
	if ids.flushTimer != nil || ids.closed {
		return
	}
	ids.flushing.Add(1)
	ids.flushTimer = time.AfterFunc(clientFlushEvery, func() {
		defer ids.flushing.Done()
		if err := ids.flush(); err != nil {
			ids.log.Warn("client identity bindings not written; they are kept in memory and written again at the next change or when the node stops",
				slog.String(logkey.Path, ids.path), slog.Any(logkey.Error, err))
		}
	})
}

// flush writes the bindings if they changed since the last write.
func (ids *identities) flush() error {
	ids.mu.Lock()
	ids.flushTimer = nil
	if !ids.dirty {
		ids.mu.Unlock()
		return nil
	}
	data, gen, err := ids.snapshot(ids.bound)
	ids.mu.Unlock()
	if err == nil {
		err = ids.write(data, gen)
	}
	if err != nil {
		ids.mu.Lock()
		ids.dirty = true
		ids.mu.Unlock()
		return fmt.Errorf("write identity bindings to %s: %w", ids.path, err)
	}
	return nil
}

// close writes the client bindings not written yet, once any write under
// way is done. Bindings made after it are kept in memory only.
func (ids *identities) close() error {
	ids.mu.Lock()
	ids.closed = true
	if ids.flushTimer != nil && ids.flushTimer.Stop() {
		ids.flushing.Done()
	}
	ids.flushTimer = nil
	ids.mu.Unlock()
	ids.flushing.Wait()
	return ids.flush()
}

// counts returns how many node and client bindings are held, and how many
// client bindings the cap dropped.
func (ids *identities) counts() (nodes, clients int, evicted int64) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.clients.expire(ids.now())
	return len(ids.bound), ids.clients.order.Len(), ids.clients.evicted
}

var (
	descIdentityBindings = prometheus.NewDesc("petrel_identity_bindings",
		"Ids bound to identities, by kind: node (for good, or pinned) and client (until a dedupe window after their last handshake).",
		[]string{"kind"}, nil)
	descIdentityEvicted = prometheus.NewDesc("petrel_identity_bindings_evicted_total",
		"Client bindings dropped before their time because the cap of client bindings was reached.", nil, nil)
)

// identityCollector reads the identity bindings at scrape time.
type identityCollector struct{ n *Node }

// Describe implements prometheus.Collector.
func (identityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descIdentityBindings
	ch <- descIdentityEvicted
}

// Collect implements prometheus.Collector.
func (c identityCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.idents == nil {
		return
	}
	nodes, clients, evicted := c.n.idents.counts()
	ch <- gauge(descIdentityBindings, int64(nodes), "node")
	ch <- gauge(descIdentityBindings, int64(clients), "client")
	ch <- counter(descIdentityEvicted, evicted)
}
