package petrel

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/session"
)

// Interest forwarding: a node tells its neighbours which topic patterns
// its subscriptions want, and they forward matching publishes to it, one
// copy per next hop however many subscriptions match there.
//
// Interest is carried in ordinary messages, not in packet types of its
// own: a data message of DataType interestType, sent to interestAddr on
// the neighbour through the send queue "_petrel.topics@<neighbour>". So it
// has what every message has without a line of protocol: custody (the
// neighbour acks after commit), persistence while the link is down, order
// in its queue, and dedupe on (origin, id). Publishes forwarded to a
// neighbour take the same send queue (keeping their topic as destination),
// so interest and the messages it draws share one link and one order.
//
// The receiving node learns interest per (neighbour it came from,
// subscribing node, pattern), persisted in the store, and passes it on to
// its other neighbours with its own name appended to the hops; interest
// whose hops hold the receiving node, or that crossed maxInterestHops,
// goes no further.

const (
	// interestAddr is the address node-to-node topic traffic goes to. It
	// is a valid address name (a link's session opens on it), reserved:
	// validateTopics refuses to declare it.
	interestAddr = "_petrel.topics"
	// interestType is the DataType of an interest message.
	interestType = "petrel.interest"
	// The properties of an interest message, and the hops of a forwarded
	// publish.
	propOp      = "petrel.op" // "subscribe" or "unsubscribe"
	propPattern = "petrel.pattern"
	propDurable = "petrel.durable"
	propNode    = "petrel.node" // the subscribing node
	propHops    = "petrel.hops" // comma-separated, the nodes crossed
	opSubscribe = "subscribe"
	opUnsub     = "unsubscribe"
	// maxInterestHops is the backstop on the hops of interest and of
	// forwarded publishes.
	maxInterestHops = 8
	// maxLearnedInterest bounds the interest a node keeps for its
	// neighbours, (neighbour, node, pattern) entries in all: each one is
	// persisted and matched on every publish, and a neighbour could
	// announce patterns without end. Past it, new interest is dropped and
	// counted (petrel_topic_interest_dropped_total); what is known stays.
	maxLearnedInterest = 10000
	// metaInterestPrefix starts the key of each piece of learned interest
	// (interestMetaKey), whose value is its interestRecord as JSON, and
	// metaAnnouncedPrefix that of each pattern this node announced, whose
	// value is the pattern (see meta_records.go); metaInterest and
	// metaAnnounced are where older builds kept each set in one value.
	metaInterestPrefix  = "topic_interest:"
	metaAnnouncedPrefix = "topic_announced:"
	metaInterest        = "topic_interest"
	metaAnnounced       = "topic_announced"
)

// interestKey identifies one piece of learned interest.
type interestKey struct{ Neighbour, Node, Pattern string }

// interestRecord is one piece of learned interest as persisted.
type interestRecord struct {
	Neighbour string   `json:"neighbour"`
	Node      string   `json:"node"`
	Pattern   string   `json:"pattern"`
	Durable   bool     `json:"durable"`
	Hops      []string `json:"hops"`
	pattern   address.Pattern
}

// interestTable is the interest a node learned from its neighbours and
// the patterns it announced. mu guards learned, which every publish reads;
// changeMu serialises the changes, which commit to the store.
type interestTable struct {
	changeMu sync.Mutex
	mu       sync.RWMutex
	learned  map[interestKey]*interestRecord
	// index finds the pieces of learned whose pattern matches a topic
	// (topic_index.go); set and learn keep it with learned.
	index     patternIndex[*interestRecord]
	fallbacks atomic.Int64 // matches the index gave up: petrel_topic_match_fallbacks_total
	announced map[string]bool
	// durable holds, for each pattern announced since the node's start,
	// whether it was announced durable: a pattern's durability can change
	// while it stays announced (announceLocked). Not persisted: the start
	// announces every pattern with its durability again (announce).
	durable map[string]bool
	// retry holds the patterns whose announcement or withdrawal failed
	// (the store refused the interest message: full): the topic janitor
	// brings each in line again (retryAnnouncements). Guarded by changeMu;
	// retries mirrors its size for the gauge.
	retry   map[string]bool
	retries atomic.Int64
	max     int // bounds learned: maxLearnedInterest
	// heard is when each neighbour's last interest message arrived, since
	// the topic janitor last took it (takeHeard): a neighbour that just
	// spoke is reachable, whatever the links read at the janitor's tick.
	// Guarded by heardMu, not mu, which every publish reads.
	heardMu sync.Mutex
	heard   map[string]time.Time
	// hops caches nextHops' answers by topic and hops crossed. Emptied by
	// every change of learned.
	hops answers[[]string]
}

// set records r as the piece of interest k, replacing the one k had;
// with r nil it forgets k's. Called with mu held.
func (it *interestTable) set(k interestKey, r *interestRecord) {
	if old := it.learned[k]; old != nil {
		it.index.remove(old.Pattern, old)
		delete(it.learned, k)
	}
	if r != nil {
		it.learned[k] = r
		it.index.add(r.Pattern, r)
	}
}

// limit is how many pieces of interest the table keeps at most.
func (it *interestTable) limit() int {
	if it.max > 0 {
		return it.max
	}
	return maxLearnedInterest
}

// nextHops returns the neighbours a publish to topic goes to: those with
// learned interest that matches, for a subscribing node the message has
// not crossed, and that are not in its hops.
func (it *interestTable) nextHops(topic string, hops []string) []string {
	it.mu.RLock()
	defer it.mu.RUnlock()
	key := topic + "\x00" + strings.Join(hops, ",")
	if out, ok := it.hops.get(key); ok {
		return out
	}
	out := it.scan(topic, hops)
	it.hops.put(key, out, len(out))
	return out
}

// scan is nextHops without the cache; it.mu is held. The answer is
// shared: callers only read it.
func (it *interestTable) scan(topic string, hops []string) []string {
	rs := matchAll(&it.index, topic, it.learned, func(r *interestRecord) address.Pattern { return r.pattern }, &it.fallbacks)
	var out []string
	for _, r := range rs {
		if slices.Contains(out, r.Neighbour) || slices.Contains(hops, r.Neighbour) || slices.Contains(hops, r.Node) {
			continue
		}
		out = append(out, r.Neighbour)
	}
	sort.Strings(out)
	return out
}

// neighbours are the nodes interest is announced to: the directory's,
// that is those configured in nodes (as the last reload left them) and
// those discovery found, which anycast reaches directly too (their own
// next hop). The topic janitor announces to a node when it joins them
// (topic_grace.go).
func (n *Node) neighbours() []string {
	entries := n.dir.Entries()
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Name != n.cfg.Name {
			out = append(out, e.Name)
		}
	}
	return out
}

// interestMessage builds one interest message.
func (n *Node) interestMessage(op, pattern, node string, durable bool, hops []string) *message.Message {
	m := n.Producer().CreateDataMessage(interestAddr)
	setInterest(m, op, pattern, node, durable, hops)
	return m
}

// setInterest makes m an interest message: its data type and properties,
// in the order drawn in the README (Interest forwarding).
func setInterest(m *message.Message, op, pattern, node string, durable bool, hops []string) {
	m.Data.DataType = interestType
	m.Properties.Set(propOp, message.String(op))
	m.Properties.Set(propPattern, message.String(pattern))
	m.Properties.Set(propDurable, message.Bool(durable))
	m.Properties.Set(propNode, message.String(node))
	m.Properties.Set(propHops, message.String(strings.Join(hops, ",")))
}

// sendInterest sends m to every neighbour not in hops, in one store
// operation, and waits for it to commit.
func (n *Node) sendInterest(ctx context.Context, m *message.Message, hops []string) error {
	var puts []queue.Put
	for _, nb := range n.neighbours() {
		if slices.Contains(hops, nb) {
			continue
		}
		q, err := n.sendQueue(ctx, interestAddr, nb)
		if err != nil {
			return fmt.Errorf("send interest to %s: %w", nb, err)
		}
		puts = append(puts, queue.Put{Queue: q, Msg: m})
	}
	if len(puts) == 0 {
		return nil
	}
	op, err := n.store.Submit(puts)
	if err != nil {
		return fmt.Errorf("send interest: %w", err)
	}
	if err := op.Wait(ctx); err != nil {
		return fmt.Errorf("send interest: %w", err)
	}
	return nil
}

// announce announces every pattern of this node's subscriptions again,
// and withdraws those announced that no subscription has any more: at
// start, idempotent downstream. Called before the node serves.
func (n *Node) announce(ctx context.Context) error {
	t := n.topics
	if len(n.cfg.Nodes) == 0 {
		return nil
	}
	want := map[string]bool{} // pattern -> durable
	t.mu.RLock()
	for p, u := range t.uses {
		want[p] = u.durable > 0
	}
	t.mu.RUnlock()
	it := &t.remote
	it.changeMu.Lock()
	defer it.changeMu.Unlock()
	self := []string{n.cfg.Name}
	changed := map[string]any{} // the patterns' records: the pattern, or nil once withdrawn
	for p, durable := range want {
		if err := n.sendInterest(ctx, n.interestMessage(opSubscribe, p, n.cfg.Name, durable, self), self); err != nil {
			return err
		}
		if !it.announced[p] {
			changed[metaAnnouncedPrefix+p] = p
		}
		it.announced[p], it.durable[p] = true, durable
	}
	for p := range it.announced {
		if _, ok := want[p]; !ok {
			if err := n.withdrawAnnounced(ctx, p); err != nil {
				return err
			}
			delete(it.announced, p)
			delete(it.durable, p)
			changed[metaAnnouncedPrefix+p] = nil
		}
	}
	return n.setRecords(ctx, changed)
}

// announceChange brings this node's announcement of pattern p in line
// with its subscriptions, after one of them came or went: one subscribe
// per pattern, however many subscriptions share it, another when the
// pattern becomes durable or stops being so, and an unsubscribe once
// none is left. It reads p's count of subscriptions, not every
// subscription, and writes p's record only when the announcement
// changes: a consumer joining a subscription whose pattern is announced
// writes nothing. Called with topics.subMu held.
func (n *Node) announceChange(ctx context.Context, p string) error {
	t := n.topics
	if len(n.cfg.Nodes) == 0 {
		return nil
	}
	t.mu.RLock()
	u, wanted := t.uses[p]
	t.mu.RUnlock()
	it := &t.remote
	it.changeMu.Lock()
	defer it.changeMu.Unlock()
	if err := n.announceLocked(ctx, p, u, wanted); err != nil {
		if it.retry == nil {
			it.retry = map[string]bool{}
		}
		it.retry[p] = true
		it.retries.Store(int64(len(it.retry)))
		return err
	}
	if it.retry[p] {
		delete(it.retry, p)
		it.retries.Store(int64(len(it.retry)))
	}
	return nil
}

// announceLocked is announceChange's work. The announcement changes in
// memory only once its record committed: a retry after a failure sends
// the interest message again, which is idempotent downstream. Called
// with changeMu held.
func (n *Node) announceLocked(ctx context.Context, p string, u patternUses, wanted bool) error {
	it := &n.topics.remote
	durable := u.durable > 0
	self := []string{n.cfg.Name}
	switch {
	case wanted && !it.announced[p]:
		if err := n.sendInterest(ctx, n.interestMessage(opSubscribe, p, n.cfg.Name, durable, self), self); err != nil {
			return err
		}
		if err := n.setRecords(ctx, map[string]any{metaAnnouncedPrefix + p: p}); err != nil {
			return err
		}
		it.announced[p], it.durable[p] = true, durable
	case wanted && it.durable[p] != durable:
		// A durable subscription joined a pattern only non-durable ones
		// held, or the last durable one left while non-durable ones stay.
		// The neighbours hold the interest as announced, and the grace
		// drops non-durable interest with what waits for it: announced
		// non-durable, a durable subscription's publishes would go with
		// it during an outage.
		if err := n.sendInterest(ctx, n.interestMessage(opSubscribe, p, n.cfg.Name, durable, self), self); err != nil {
			return err
		}
		it.durable[p] = durable
	case !wanted && it.announced[p]:
		if err := n.withdrawAnnounced(ctx, p); err != nil {
			return err
		}
		if err := n.setRecords(ctx, map[string]any{metaAnnouncedPrefix + p: nil}); err != nil {
			return err
		}
		delete(it.announced, p)
		delete(it.durable, p)
	}
	return nil
}

// withdrawAnnounced sends the unsubscribe of p, which this node announced.
// Called with the interest table's changeMu held.
func (n *Node) withdrawAnnounced(ctx context.Context, p string) error {
	self := []string{n.cfg.Name}
	return n.sendInterest(ctx, n.interestMessage(opUnsub, p, n.cfg.Name, false, self), self)
}

// announceLogged is announceChange for the paths that cannot return its
// error: the topic janitor tries p again (retryAnnouncements).
func (n *Node) announceLogged(ctx context.Context, p string) {
	if err := n.announceChange(ctx, p); err != nil {
		n.log.Warn("announce topic interest to neighbours; the topic janitor tries again",
			slog.String("pattern", p), slog.Any(logkey.Error, err))
	}
}

// retryAnnouncements brings in line again the announcements that failed:
// a withdrawal that stayed unsent left the neighbours forwarding, and
// queueing while this node was away, what no subscription here wants
// any more. Run by the topic janitor at each tick; a pattern that fails
// again stays for the next.
func (n *Node) retryAnnouncements(ctx context.Context) {
	it := &n.topics.remote
	if it.retries.Load() == 0 {
		return
	}
	it.changeMu.Lock()
	ps := make([]string, 0, len(it.retry))
	for p := range it.retry {
		ps = append(ps, p)
	}
	it.changeMu.Unlock()
	sort.Strings(ps)
	t := n.topics
	for _, p := range ps {
		// Under subMu, as every other change of an announcement: p's
		// subscriptions stay as read meanwhile.
		t.subMu.Lock()
		err := n.announceChange(ctx, p)
		t.subMu.Unlock()
		if err != nil {
			n.log.Debug("announce topic interest to neighbours, again", slog.String("pattern", p), slog.Any(logkey.Error, err))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// interestMetaKey is the store's meta key of the piece of interest k.
func interestMetaKey(k interestKey) string {
	b, _ := json.Marshal([]string{k.Neighbour, k.Node, k.Pattern})
	return metaInterestPrefix + string(b)
}

// saveInterest stores r as the piece of interest k, or deletes k's when r
// is nil.
func (n *Node) saveInterest(ctx context.Context, k interestKey, r *interestRecord) error {
	var v any
	if r != nil {
		v = r
	}
	return n.setRecords(ctx, map[string]any{interestMetaKey(k): v})
}

// forgetInterest deletes the stored pieces of interest recs, in one
// commit.
func (n *Node) forgetInterest(ctx context.Context, recs []*interestRecord) error {
	gone := make(map[string]any, len(recs))
	for _, r := range recs {
		gone[interestMetaKey(interestKey{r.Neighbour, r.Node, r.Pattern})] = nil
	}
	return n.setRecords(ctx, gone)
}

// loadInterest reads the learned interest and the announced patterns, then
// announces this node's patterns again and passes on what it learned, so
// that a neighbour added to the configuration, or a message lost with a
// store, is made good.
func (n *Node) loadInterest(ctx context.Context) error {
	it := &n.topics.remote
	it.learned, it.announced, it.durable = map[interestKey]*interestRecord{}, map[string]bool{}, map[string]bool{}
	it.index = patternIndex[*interestRecord]{}
	// Records are read as values: a stored "null" is then a record with
	// no pattern, refused below, not a nil one.
	vals, err := loadRecords(ctx, n, metaInterest, metaInterestPrefix, func(r interestRecord) string {
		return interestMetaKey(interestKey{r.Neighbour, r.Node, r.Pattern})
	})
	if err != nil {
		return fmt.Errorf("load topic interest: %w", err)
	}
	recs := make([]*interestRecord, len(vals))
	for i := range vals {
		recs[i] = &vals[i]
	}
	announced, err := loadRecords(ctx, n, metaAnnounced, metaAnnouncedPrefix, func(p string) string { return metaAnnouncedPrefix + p })
	if err != nil {
		return fmt.Errorf("load topic interest: %w", err)
	}
	for _, p := range announced {
		it.announced[p] = true
	}
	for _, r := range recs {
		p, err := address.ParsePattern(r.Pattern)
		if err != nil {
			return fmt.Errorf("load topic interest of %s: %w", r.Node, err)
		}
		r.pattern = p
		it.set(interestKey{r.Neighbour, r.Node, r.Pattern}, r)
	}
	it.hops.forget()
	if err := n.emptyPruneBin(ctx); err != nil {
		return err
	}
	if len(n.topics.spaces) == 0 {
		return nil
	}
	if err := n.announce(ctx); err != nil {
		return err
	}
	for _, r := range recs {
		hops := append(slices.Clone(r.Hops), n.cfg.Name)
		if err := n.sendInterest(ctx, n.interestMessage(opSubscribe, r.Pattern, r.Node, r.Durable, hops), hops); err != nil {
			return err
		}
	}
	return nil
}

// authorizeInterest is where a peer's interest is checked before it is
// stored. Today interest is accepted under the `send` access rule of
// interestAddr, checked with every inbound message; rules on which
// patterns a peer may subscribe to belong here. m holds only the header
// here (the receiver routes on it): the interest itself is read, and a
// malformed one dropped, by the inbox pump.
//
// Every hop authors the interest it passes on (applyInterest makes a new
// message), so an interest message's origin must be the id its peer
// proved: a peer cannot hand over interest in another node's name. The
// pump then checks that the neighbour the message names as its last hop is
// the node of that origin (interestFrom).
func (n *Node) authorizeInterest(peer session.Peer, m *message.Message) error {
	if m.Origin != peer.ID {
		return fmt.Errorf("%w: node %s: topic interest from %q must be its own (origin %s), not origin %s",
			receiver.ErrRefused, n.cfg.Name, peer.Name, peer.ID, m.Origin)
	}
	return nil
}

// interestFrom checks that the neighbour an interest message names as its
// last hop is the node that authored it: the identity bound to its
// origin. A neighbour with no binding (a shared-secret member, which
// proves membership only) is taken at its word.
func (n *Node) interestFrom(neighbour string, m *message.Message) error {
	if id, ok := n.idents.nodeID(neighbour); ok && id != m.Origin {
		return fmt.Errorf("%w: it names %q as the neighbour it came from, but was authored by origin %s, not %q's id %s",
			errBadInterest, neighbour, m.Origin, neighbour, id)
	}
	return nil
}

// hopsOf returns the nodes m crossed, from its hops property.
func hopsOf(m *message.Message) []string {
	v, ok := m.Properties.Get(propHops)
	if !ok || v.Str() == "" {
		return nil
	}
	return strings.Split(v.Str(), ",")
}

// InterestInfo is one piece of topic interest a node learned: Node
// subscribes to Pattern, and publishes that match go to Neighbour.
type InterestInfo struct {
	Neighbour string   `json:"neighbour"`
	Node      string   `json:"node"`
	Pattern   string   `json:"pattern"`
	Durable   bool     `json:"durable"`
	Hops      []string `json:"hops"`
}

// TopicInterest lists the interest this node learned from its
// neighbours, sorted by neighbour, node and pattern.
func (n *Node) TopicInterest() []InterestInfo {
	it := &n.topics.remote
	it.mu.RLock()
	out := make([]InterestInfo, 0, len(it.learned))
	for _, r := range it.learned {
		out = append(out, InterestInfo{Neighbour: r.Neighbour, Node: r.Node, Pattern: r.Pattern, Durable: r.Durable, Hops: slices.Clone(r.Hops)})
	}
	it.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Neighbour+"\x00"+a.Node+"\x00"+a.Pattern < b.Neighbour+"\x00"+b.Node+"\x00"+b.Pattern
	})
	return out
}
