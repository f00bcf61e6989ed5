package petrel

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
)

// Topics: an address is anycast (a queue, competing consumers) unless its
// name falls in a declared topic space (Config.Topics), which makes it
// multicast: a publish to it is stored once per subscription whose
// pattern matches, in one store operation. A subscription is a receive
// queue of its own, named subQueuePrefix+name: ':' is not a name byte
// (message.ValidName), so no address can collide with it, and everything
// a queue has (priority, TTL, leases, nacks, dead letters, the consumer
// modes) it has too.

var (
	// ErrNoTopicSpace is returned by Subscribe when the pattern is not
	// within a topic space declared in Config.Topics.
	ErrNoTopicSpace = errors.New("pattern is not within a declared topic space")
	// ErrSubscription is returned by Subscribe when the options cannot
	// make or join a subscription: a durable one without a name, a name
	// taken by a subscription with another pattern or durability; and by
	// Unsubscribe for a name that is no durable subscription.
	ErrSubscription = errors.New("invalid subscription")

	// errSubscriptionName is the ErrSubscription of a malformed or missing
	// name: a bad request, where the others are conflicts with what is
	// (see writeSubscribeError).
	errSubscriptionName = fmt.Errorf("%w name", ErrSubscription)
	// ErrFileToTopic is returned by Send for a file message to a topic:
	// files go to one address, not to every subscriber.
	ErrFileToTopic = errors.New("file messages cannot be published to a topic")
	// ErrNotSupported is returned by a Client for what only an embedded
	// node can do, such as setting a subscription's queue policy.
	ErrNotSupported = errors.New("not supported by this endpoint")
)

// TopicConfig declares a topic space: every address name its Pattern
// matches is a topic.
type TopicConfig struct {
	// Pattern of the names in the space, such as "orders.#" ('*' is one
	// word, '#' zero or more).
	Pattern string
	// Keep, when its Messages is set, holds the publishes to the space
	// that match no subscription, for the durable subscriptions made
	// later; the zero value drops them, counted. See TopicKeep.
	Keep TopicKeep
	// MaxQueuedMessages bounds each subscription of the space: the
	// messages it holds, waiting or in flight. Past it messages are
	// dropped, the new copy or the oldest as Overflow says, and counted
	// (SubscriptionInfo.Overflowed, petrel_queue_overflowed_total); the
	// publish still reaches the other subscriptions. So a subscription nobody consumes (an MQTT client's
	// persistent session that never returns) cannot fill the store, past
	// whose limits every send is refused. 0, the default, bounds a
	// subscription by the store's limits alone. Where a subscription's
	// pattern lies in several spaces, the least bound of theirs holds.
	MaxQueuedMessages int64
	// Overflow says which copies go past MaxQueuedMessages: "drop_new"
	// (the default, as Mosquitto drops what it would queue past a
	// client's bound) drops the copy that would pass it; "drop_oldest"
	// stores it and drops the subscription's oldest messages not in
	// flight instead, as RabbitMQ's drop-head and JetStream's discard old
	// do, so that a subscriber that comes back gets the latest. The
	// oldest are dropped by the node's topic janitor just after the
	// publishes that passed the bound, so the subscription may hold more
	// for a moment.
	Overflow string
}

// TopicKeep is a topic space's keep policy. A publish that matches no
// subscription, local or remote, is held in the space's keep queue
// instead of being dropped; a durable subscription made later takes, in
// one transaction, the held publishes its pattern matches, as if it had
// existed when they were published. Each held publish goes to the first
// durable subscription that matches it, not to every later one.
type TopicKeep struct {
	// Messages is how many publishes the space holds at most; past it the
	// oldest is dropped, counted in petrel_topic_keep_dropped_total.
	Messages int `json:"messages,omitempty"`
	// Age is how long a publish is held at most, from its timestamp; 0
	// is no limit.
	Age time.Duration `json:"age,omitempty"`
}

// SubscribeOptions say which subscription Subscribe makes or joins.
type SubscribeOptions struct {
	// Name identifies the subscription. Consumers that subscribe with the
	// same name (and pattern) share it: they compete for its messages.
	// Required when Durable; empty makes a private non-durable one.
	Name string
	// Durable subscriptions survive their consumers and restarts, and
	// keep accumulating while no consumer is attached; Unsubscribe deletes
	// one. A non-durable one is deleted, with what it holds, when its last
	// consumer closes, and by the next start after a crash.
	Durable bool
	// Policy is the subscription queue's consumer policy (leases,
	// redelivery, dead letters). It is not persisted: a durable
	// subscription has the default policy after a restart until it is
	// subscribed to again.
	Policy QueuePolicy
}

// SubscriptionInfo describes one subscription.
type SubscriptionInfo struct {
	Name      string `json:"name"`
	Pattern   string `json:"pattern"`
	Durable   bool   `json:"durable"`
	Queue     string `json:"queue"`
	Consumers int    `json:"consumers"`
	Depth     int64  `json:"depth"`
	// MaxQueued is its bound (TopicConfig.MaxQueuedMessages), 0 for none;
	// Overflowed counts the copies dropped at it since the subscription
	// was made; it survives restarts.
	MaxQueued  int64 `json:"max_queued,omitempty"`
	Overflowed int64 `json:"overflowed,omitempty"`
	// Owner is the identity that made it, which alone may join it: a
	// remote client's or an MQTT client's; empty for the node's own (an
	// application's, the admin API's) and for the MQTT shared groups'.
	Owner string `json:"owner,omitempty"`
}

const (
	// subQueuePrefix names subscription queues; see the file comment.
	subQueuePrefix = "sub:"
	// metaSubscriptionPrefix starts the key of each durable subscription,
	// whose value is its durableRecord as JSON (see meta_records.go);
	// metaSubscriptions is where older builds kept them all in one value.
	metaSubscriptionPrefix = "topic_subscription:"
	metaSubscriptions      = "topic_subscriptions"
)

// topics is a node's topic spaces and subscriptions.
type topics struct {
	spaces []address.Pattern
	// maxQueued are the spaces' MaxQueuedMessages, and dropOldest
	// whether their Overflow is drop_oldest, in their order; anyOldest
	// whether any bounded space's is.
	maxQueued  []int64
	dropOldest []bool
	anyOldest  bool

	// subMu serialises the changes of subscriptions (which commit to the
	// store); mu guards subs, which every publish reads.
	subMu sync.Mutex
	mu    sync.RWMutex
	subs  map[string]*subEntry
	// uses counts, per pattern, the subscriptions that have it and the
	// durable ones among them (under mu, with subs): what a subscription
	// that comes or goes changes in this node's announcement, found
	// without reading every subscription.
	uses map[string]patternUses
	// owned counts, per identity, the subscriptions its remote clients
	// own (under mu, with subs), against max_subscriptions_per_identity;
	// refusedOwner, refusedReserved and refusedBound count the clients'
	// subscribes refused (petrel_topic_subscriptions_refused_total).
	owned                                       map[string]int
	refusedOwner, refusedReserved, refusedBound atomic.Int64
	// index finds the subscriptions a topic name matches (topic_index.go),
	// under mu, with subs; fallbacks counts the matches it gave up.
	index     subIndex
	fallbacks atomic.Int64
	// matched caches matching's answers by topic name: matching every
	// subscription's pattern on each publish cut publishing 30-fold at
	// 2,000 subscriptions. Emptied whenever subs changes.
	matched answers[[]*queue.Queue]

	published, unrouted atomic.Int64

	// remote is the interest learned from neighbours (topic_interest.go);
	// forwarded counts the copies sent to next hops, interestDropped the
	// interest and forwards refused (malformed, looped, past max hops).
	remote                     interestTable
	forwarded, interestDropped atomic.Int64
	// fullLog rate-limits the warning about interest dropped for
	// maxLearnedInterest, per neighbour.
	fullLog ratelog.Limiter
	// interestDenied counts the interest refused by the subscribe access
	// rules; deniedLog rate-limits its warning, per neighbour.
	interestDenied atomic.Int64
	deniedLog      ratelog.Limiter
	// takenLog rate-limits the line of a subscription refused for its
	// name being another identity's, per identity: a client that asks in
	// a loop must not flood the log.
	takenLog ratelog.Limiter

	// pruneMu serialises the prunes of send queues (topic_prune.go), so
	// that two never read the same rows; prunedUnsub and prunedGrace count
	// what they dropped.
	pruneMu                  sync.Mutex
	prunedUnsub, prunedGrace atomic.Int64
	// pruneWant holds the neighbours whose withdrawals wait for the
	// janitor's next prune (under pruneWantMu); pruneKick wakes it, and
	// pruneRuns counts the reads of a send queue to prune it.
	pruneWantMu sync.Mutex
	pruneWant   map[string]bool
	pruneKick   chan struct{}
	pruneRuns   atomic.Int64
	// released counts the topic send queues dropped toward discovered
	// nodes that left the directory (releaseGone).
	released atomic.Int64

	// keeps are the spaces' keep policies (topic_keep.go), in the order
	// of the spaces; keepKick wakes the janitor to enforce their bounds.
	keeps    []*keepSpace
	keepKick chan struct{}
	// kept counts the publishes held, keepTaken those a new durable
	// subscription took, keepDropped* those dropped past a bound.
	kept, keepTaken, keepDroppedCount, keepDroppedAge atomic.Int64
}

// patternUses is how many subscriptions of a node have one pattern, and
// how many of them are durable.
type patternUses struct{ subs, durable int }

// addSub records e. Called with mu held.
func (t *topics) addSub(e *subEntry) {
	e.bound, e.dropOldest = t.maxQueuedFor(e.pattern)
	if e.dropOldest {
		e.q.SetMaxDepth(0) // the janitor drops the oldest (trimSubscriptions)
	} else {
		e.q.SetMaxDepth(e.bound)
	}
	t.subs[e.name] = e
	t.index.add(e.pattern.String(), e)
	t.use(e, 1)
	t.own(e, 1)
}

// removeSub forgets e. Called with mu held.
func (t *topics) removeSub(e *subEntry) {
	if t.subs[e.name] != e {
		return
	}
	delete(t.subs, e.name)
	t.index.remove(e.pattern.String(), e)
	t.use(e, -1)
	t.own(e, -1)
}

// own counts e for its owner's bound (max_subscriptions_per_identity)
// when e is a remote client's. Called with mu held.
func (t *topics) own(e *subEntry, d int) {
	if !e.counted {
		return
	}
	if t.owned == nil {
		t.owned = map[string]int{}
	}
	t.owned[e.owner] += d
	if t.owned[e.owner] <= 0 {
		delete(t.owned, e.owner)
	}
}

func (t *topics) use(e *subEntry, d int) {
	if t.uses == nil {
		t.uses = map[string]patternUses{}
	}
	p := e.pattern.String()
	u := t.uses[p]
	u.subs += d
	if e.durable {
		u.durable += d
	}
	if u.subs <= 0 {
		delete(t.uses, p)
		return
	}
	t.uses[p] = u
}

type subEntry struct {
	name      string
	pattern   address.Pattern
	durable   bool
	q         *queue.Queue
	consumers int // guarded by topics.subMu
	// bound is its MaxQueuedMessages, 0 for none; dropOldest whether the
	// janitor keeps it there by dropping its oldest (trimSubscriptions)
	// rather than its queue refusing new copies (Queue.SetMaxDepth).
	bound      int64
	dropOldest bool
	// owner is the identity that made it: "" for the node's own (an
	// application's Subscribe, the admin API) and the MQTT gateway's
	// shared groups, a remote client's or an MQTT client's proven
	// identity otherwise. Another identity may not join it: the name is
	// no secret (an MQTT session's is derived from its client id), and
	// joining takes the messages that wait for the owner. unclaimed marks
	// a durable one persisted before subscriptions had owners: the first
	// identity that joins it takes it, as the MQTT gateway's sessions
	// stored without an owner are. counted is whether it counts against
	// its owner's max_subscriptions_per_identity (a remote client's).
	// All three change under subMu only.
	owner     string
	unclaimed bool
	counted   bool
}

// durableRecord is one durable subscription as persisted. Owner is nil in
// a record written before subscriptions had owners (see subEntry.owner),
// and points to "" for the node's own.
type durableRecord struct {
	Name    string  `json:"name"`
	Pattern string  `json:"pattern"`
	Owner   *string `json:"owner,omitempty"`
}

// subscriber is who makes or joins a subscription. The node's own
// (the zero value) may join any; a client (a remote client, or an MQTT
// client with an identity) only its identity's, or an unclaimed one; a
// remote client's are also kept from the gateway's names and counted
// against max_subscriptions_per_identity.
type subscriber struct {
	identity string
	client   bool
	remote   bool
}

// errSubscriptionTaken refuses a client a subscription name another
// identity owns; errSubscriptionReserved one that starts with a prefix of
// the MQTT gateway's subscriptions. Both wrap ErrSubscription.
var (
	// errNoSubscription: Unsubscribe of a name no durable subscription
	// has (the admin API answers it 404).
	errNoSubscription       = fmt.Errorf("%w: no such durable subscription", ErrSubscription)
	errSubscriptionTaken    = fmt.Errorf("%w: the name is taken by another identity", ErrSubscription)
	errSubscriptionReserved = fmt.Errorf("%w: the name is reserved for the MQTT gateway", ErrSubscription)
)

func newTopics(cfg []TopicConfig) (*topics, error) {
	t := &topics{subs: map[string]*subEntry{}, keepKick: make(chan struct{}, 1), pruneKick: make(chan struct{}, 1)}
	for _, c := range cfg {
		p, err := address.ParsePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("topics: %w", err)
		}
		if isInternal(c.Pattern) {
			return nil, fmt.Errorf("topics: topic pattern %q: %w", c.Pattern, errInternalPattern)
		}
		t.spaces = append(t.spaces, p)
		if c.MaxQueuedMessages < 0 {
			return nil, fmt.Errorf("topics: %q: max_queued_messages must be 0 (no bound) or more (got %d)", c.Pattern, c.MaxQueuedMessages)
		}
		t.maxQueued = append(t.maxQueued, c.MaxQueuedMessages)
		switch c.Overflow {
		case "", overflowDropNew:
			t.dropOldest = append(t.dropOldest, false)
		case overflowDropOldest:
			t.dropOldest = append(t.dropOldest, true)
			t.anyOldest = t.anyOldest || c.MaxQueuedMessages > 0
		default:
			return nil, fmt.Errorf("topics: %q: overflow %q: want %s or %s", c.Pattern, c.Overflow, overflowDropNew, overflowDropOldest)
		}
		if c.Keep.Messages < 0 || c.Keep.Age < 0 || c.Keep.Messages == 0 && c.Keep.Age != 0 {
			return nil, fmt.Errorf("topics: %q: keep: messages must be set, more than 0, and age 0 or more (got messages %d, age %s)", c.Pattern, c.Keep.Messages, c.Keep.Age)
		}
		if c.Keep.Messages > 0 {
			t.keeps = append(t.keeps, &keepSpace{pattern: p, cfg: c.Keep})
		}
	}
	return t, nil
}

// internalWord is the first word of the addresses of the node's own
// traffic between nodes (interestAddr, "_petrel.topics"). A space such as
// "#" or "*.#" matches them word by word, yet they are never topics: taken
// for one, a neighbour's interest would be judged, and fanned out, as a
// publish. Nor may a space or a subscription's pattern start with it.
const internalWord = "_petrel"

// isInternal reports whether the name, or pattern, starts with
// internalWord.
func isInternal(name string) bool {
	first, _, _ := strings.Cut(name, ".")
	return first == internalWord
}

// reservedName returns why the address name, whose first word is
// internalWord, is refused to a producer or a consumer; nil for any other
// name. The node makes those queues itself (sendQueue, for interest) and
// judges what arrives there as its own traffic: a message a producer put
// there would be taken for a neighbour's interest, or stranded in a queue
// nothing reads. Errors wrap message.ErrDestination.
func reservedName(name string) error {
	if !isInternal(name) {
		return nil
	}
	return fmt.Errorf("address %q: names whose first word is %q are reserved for the node's internal traffic (such as %q); use another name: %w",
		name, internalWord, interestAddr, message.ErrDestination)
}

// errInternalPattern is the reason a space or subscription pattern that
// starts with internalWord is refused.
var errInternalPattern = fmt.Errorf("the word %q starts the node's internal addresses (such as %q), which are never topics; start the pattern with another word: %w",
	internalWord, interestAddr, address.ErrTopicPattern)

// isTopic reports whether the address name is a topic.
func (t *topics) isTopic(name string) bool {
	if len(t.spaces) == 0 || isInternal(name) || address.ValidTopic(name) != nil {
		return false
	}
	for _, s := range t.spaces {
		if s.Match(name) {
			return true
		}
	}
	return false
}

// misnamed returns why the address name, which a topic space matches word
// by word but which is no topic name ("orders..eu", "orders." or
// "orders.-x" in "orders.#"), is no address either: made a queue on first
// use, a send with a typo would strand its message where no subscription
// looks. nil for a topic, an internal name, or a name outside every
// space. Errors wrap address.ErrTopicName and message.ErrDestination.
func (t *topics) misnamed(name string) error {
	if len(t.spaces) == 0 || isInternal(name) || message.ValidName(name) != nil {
		return nil
	}
	err := address.ValidTopic(name)
	if err == nil {
		return nil
	}
	for _, s := range t.spaces {
		if s.Match(name) {
			return fmt.Errorf("%q is an invalid topic name inside topic space %q, so it is neither a topic nor an address: %w: %w", name, s.String(), err, message.ErrDestination)
		}
	}
	return nil
}

// The values of TopicConfig.Overflow.
const (
	overflowDropNew    = "drop_new"
	overflowDropOldest = "drop_oldest"
)

// maxQueuedFor returns the bound of a subscription to p, the least
// MaxQueuedMessages of the spaces that cover p (0 for none), and whether
// the space that sets it drops the oldest.
func (t *topics) maxQueuedFor(p address.Pattern) (least int64, dropOldest bool) {
	for i, s := range t.spaces {
		if m := t.maxQueued[i]; m > 0 && (least == 0 || m < least) && s.Covers(p) {
			least, dropOldest = m, t.dropOldest[i]
		}
	}
	return least, dropOldest
}

// inSpace reports whether every name p matches is a topic.
func (t *topics) inSpace(p address.Pattern) bool {
	for _, s := range t.spaces {
		if s.Covers(p) {
			return true
		}
	}
	return false
}

// matching returns the queues of the subscriptions whose pattern matches
// the topic name.
func (t *topics) matching(name string) []*queue.Queue {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if qs, ok := t.matched.get(name); ok {
		return qs
	}
	qs := t.match(name)
	t.matched.put(name, qs, len(qs))
	return qs
}

// match returns the queues of the subscriptions whose pattern matches
// name; t.mu is held. The answer is shared: callers only read it.
func (t *topics) match(name string) []*queue.Queue {
	es := matchAll(&t.index, name, t.subs, func(e *subEntry) address.Pattern { return e.pattern }, &t.fallbacks)
	if len(es) == 0 {
		return nil
	}
	out := make([]*queue.Queue, len(es))
	for i, e := range es {
		out[i] = e.q
	}
	return out
}

// localTopic returns the topic name of dest when dest is a topic of this
// node, "" otherwise.
func (n *Node) localTopic(dest string) string {
	name, node, err := message.ParseDestination(dest)
	if err != nil || node != "" && node != n.cfg.Name || !n.topics.isTopic(name) {
		return ""
	}
	return name
}

// Subscribe makes, or joins, a subscription to the topics pattern
// matches, and returns a consumer of it: the same Consumer an address
// gives, with Poll, Receive and Listen, leases, Ack and Nack. Only what
// is published after Subscribe returned is delivered to a new
// subscription; a durable one also gets what was published while no
// consumer was attached. Closing the consumer ends a non-durable
// subscription once no other consumer shares it.
//
// The pattern must be within a topic space of Config.Topics
// (ErrNoTopicSpace); a malformed pattern wraps address.ErrTopicPattern.
// Interceptors see the subscription (OnSubscribe), its deliveries and its
// acks; a refusal ends it as a Close would, and wraps ErrIntercepted.
func (n *Node) Subscribe(ctx context.Context, pattern string, opts SubscribeOptions) (*Consumer, error) {
	c, err := n.subscribe(ctx, pattern, opts, subscriber{})
	if err != nil {
		return nil, err
	}
	ic, err := n.icpt.consumer(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return ic, nil
}

// subscribe makes or joins the subscription; see Subscribe.
func (n *Node) subscribe(ctx context.Context, pattern string, opts SubscribeOptions, by subscriber) (*Consumer, error) {
	p, err := address.ParsePattern(pattern)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if isInternal(pattern) {
		return nil, fmt.Errorf("subscribe to %q: %w", pattern, errInternalPattern)
	}
	if !n.topics.inSpace(p) {
		return nil, fmt.Errorf("subscribe to %q: %w (declare a topic space that holds it, such as %q, under topics)", pattern, ErrNoTopicSpace, p.String())
	}
	name, err := subscriptionName(opts)
	if err != nil {
		return nil, err
	}
	t := n.topics
	if by.remote && (strings.HasPrefix(name, mqttgw.SessionPrefix) || strings.HasPrefix(name, mqttgw.SharePrefix)) {
		t.refusedReserved.Add(1)
		return nil, fmt.Errorf("subscribe as %q: names starting with %q or %q are the MQTT gateway's; use another name: %w",
			name, mqttgw.SessionPrefix, mqttgw.SharePrefix, errSubscriptionReserved)
	}
	t.subMu.Lock()
	defer t.subMu.Unlock()
	if n.isClosed() {
		return nil, ErrClosed
	}
	e, err := n.joinSubscription(ctx, name, p, opts, by)
	if err != nil {
		return nil, err
	}
	if opts.Policy != (QueuePolicy{}) {
		e.q.SetPolicy(opts.Policy)
	}
	e.consumers++
	n.announceLogged(ctx, e.pattern.String())
	sc := &subConsumer{queueConsumer: newQueueConsumer(n, e.q), e: e}
	return &Consumer{b: sc, addr: e.q.Name()}, nil
}

// subscriptionName checks opts and returns the subscription's name,
// made up for a private non-durable one. A made-up name starts with '~',
// which a given name cannot, so the two never meet.
func subscriptionName(opts SubscribeOptions) (string, error) {
	if opts.Name == "" {
		if opts.Durable {
			return "", fmt.Errorf("subscribe: a durable subscription needs a name: %w", errSubscriptionName)
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		return "~" + hex.EncodeToString(b[:]), nil
	}
	if err := message.ValidName(opts.Name); err != nil {
		return "", fmt.Errorf("subscribe: subscription name: %w: %w", errSubscriptionName, err)
	}
	if queue.IsDeadLetter(opts.Name) {
		// Its queue, sub:<x>.dlq, would be the dead-letter queue of
		// subscription <x>: each would take the other's messages.
		base := strings.TrimSuffix(opts.Name, queue.DeadLetterSuffix)
		return "", fmt.Errorf("subscribe: subscription name %q ends in %q, and its queue %q would be the dead-letter queue of subscription %q; use another name: %w",
			opts.Name, queue.DeadLetterSuffix, subQueuePrefix+opts.Name, base, errSubscriptionName)
	}
	if dl := opts.Policy.DeadLetter; strings.HasPrefix(dl, subQueuePrefix) && !queue.IsDeadLetter(dl) {
		return "", fmt.Errorf("subscribe: dead-letter queue %q of the policy is the queue of subscription %q; name one that ends in %q: %w",
			dl, strings.TrimPrefix(dl, subQueuePrefix), queue.DeadLetterSuffix, ErrSubscription)
	}
	return opts.Name, nil
}

// joinSubscription returns the subscription called name, making it if it
// does not exist, owned by by. Called with subMu held.
func (n *Node) joinSubscription(ctx context.Context, name string, p address.Pattern, opts SubscribeOptions, by subscriber) (*subEntry, error) {
	t := n.topics
	t.mu.RLock()
	e := t.subs[name]
	t.mu.RUnlock()
	if e != nil {
		if by.client && !e.unclaimed && e.owner != by.identity {
			// Nothing of the other subscription is told, not even
			// its pattern: it is another identity's.
			t.refusedOwner.Add(1)
			if held, ok := t.takenLog.Allow(by.identity); ok {
				n.log.Info("subscription refused: its name is another identity's",
					slog.String("subscription", name), slog.String("identity", by.identity), slog.Int64("suppressed", held))
			}
			return nil, fmt.Errorf("subscribe to %q: subscription name %q is taken by another identity; use another name: %w", p, name, errSubscriptionTaken)
		}
		if e.pattern.String() != p.String() || e.durable != opts.Durable {
			return nil, fmt.Errorf("subscribe to %q as %q: the subscription exists with pattern %q (durable %v); use another name, or Unsubscribe it first: %w",
				p, name, e.pattern, e.durable, ErrSubscription)
		}
		if by.client && e.unclaimed {
			if err := n.claimSubscription(ctx, e, by); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
	if by.remote {
		if limit, owned := n.maxSubscriptionsPerIdentity(), t.ownedBy(by.identity); owned >= limit {
			t.refusedBound.Add(1)
			return nil, fmt.Errorf("%w: subscribe to %q as %q: identity %q owns %d subscriptions already (max_subscriptions_per_identity); close the non-durable ones it does not need, or have the operator delete its durable ones (Node.Unsubscribe)",
				receiver.ErrRefused, p, name, by.identity, owned)
		}
	}
	q, err := n.newSubscriptionQueue(ctx, subQueuePrefix+name)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", p, err)
	}
	e = &subEntry{name: name, pattern: p, durable: opts.Durable, q: q, owner: by.identity, counted: by.remote}
	if opts.Durable {
		if err := n.persistSubscriptions(ctx, e, ""); err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	t.addSub(e)
	t.matched.forget()
	t.mu.Unlock()
	if opts.Durable {
		if err := n.takeKept(ctx, e); err != nil {
			// They stay held, for the next durable subscription.
			n.log.Warn("new durable subscription could not take the publishes held for it", slog.String("subscription", name), slog.Any(logkey.Error, err))
		}
	}
	return e, nil
}

// claimSubscription makes the unclaimed durable subscription e by's, as
// the MQTT gateway gives a session stored without an owner to the first
// identity that resumes it, and persists that before by joins it. Called
// with subMu held.
func (n *Node) claimSubscription(ctx context.Context, e *subEntry, by subscriber) error {
	claimed := *e
	claimed.owner, claimed.unclaimed, claimed.counted = by.identity, false, by.remote
	if err := n.persistSubscriptions(ctx, &claimed, ""); err != nil {
		return err
	}
	t := n.topics
	t.mu.Lock()
	e.owner, e.unclaimed, e.counted = claimed.owner, false, claimed.counted
	t.own(e, 1)
	t.mu.Unlock()
	n.log.Info("subscription made before subscriptions had owners taken by the first identity to join it",
		slog.String("subscription", e.name), slog.String("identity", by.identity))
	return nil
}

// ownedBy returns how many subscriptions identity's remote clients own.
func (t *topics) ownedBy(identity string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.owned[identity]
}

// newSubscriptionQueue makes the queue of a new subscription. Remote clients
// and the admin API make subscriptions, so they share the cap of the
// queues made on first use (max_auto_queues): a client cannot make
// queues without bound.
func (n *Node) newSubscriptionQueue(ctx context.Context, name string) (*queue.Queue, error) {
	n.autoMu.Lock()
	defer n.autoMu.Unlock()
	if q, ok := n.store.Lookup(name); ok {
		return q, nil
	}
	if err := n.autoCreateRoom(name); err != nil {
		return nil, err
	}
	return n.store.Queue(ctx, name, queue.KindReceive)
}

// persistSubscriptions stores the durable subscription add, or deletes
// the one called drop: that record alone. Called with subMu held.
func (n *Node) persistSubscriptions(ctx context.Context, add *subEntry, drop string) error {
	recs := map[string]any{}
	if add != nil {
		r := durableRecord{Name: add.name, Pattern: add.pattern.String()}
		if !add.unclaimed {
			owner := add.owner
			r.Owner = &owner
		}
		recs[metaSubscriptionPrefix+add.name] = r
	}
	if drop != "" {
		recs[metaSubscriptionPrefix+drop] = nil
	}
	if err := n.setRecords(ctx, recs); err != nil {
		return fmt.Errorf("save subscriptions: %w", err)
	}
	return nil
}

// Unsubscribe deletes the durable subscription called name, and the
// messages it holds. Its consumers' Receive and Poll then fail.
func (n *Node) Unsubscribe(ctx context.Context, name string) error {
	_, err := n.unsubscribe(ctx, name)
	return err
}

// unsubscribe is Unsubscribe, and returns how many messages the
// subscription held.
func (n *Node) unsubscribe(ctx context.Context, name string) (int, error) {
	t := n.topics
	t.subMu.Lock()
	defer t.subMu.Unlock()
	t.mu.RLock()
	e := t.subs[name]
	t.mu.RUnlock()
	if e == nil || !e.durable {
		return 0, fmt.Errorf("unsubscribe %q: no durable subscription has that name: %w", name, errNoSubscription)
	}
	if err := n.persistSubscriptions(ctx, nil, name); err != nil {
		return 0, err
	}
	return n.dropSubscription(ctx, e)
}

// dropSubscription forgets e and drops its queue, and returns how many
// messages it held. Called with subMu held.
func (n *Node) dropSubscription(ctx context.Context, e *subEntry) (int, error) {
	t := n.topics
	t.mu.Lock()
	t.removeSub(e)
	t.matched.forget()
	t.mu.Unlock()
	count, err := n.store.Drop(ctx, e.q)
	if err != nil {
		return 0, fmt.Errorf("delete subscription %q: %w", e.name, err)
	}
	n.announceLogged(ctx, e.pattern.String())
	return count, nil
}

// Subscriptions describes every subscription, sorted by name.
func (n *Node) Subscriptions() []SubscriptionInfo {
	t := n.topics
	t.subMu.Lock()
	defer t.subMu.Unlock()
	out := make([]SubscriptionInfo, 0, len(t.subs))
	for _, e := range t.subs {
		st := e.q.Stats()
		out = append(out, SubscriptionInfo{
			Name: e.name, Pattern: e.pattern.String(), Durable: e.durable,
			Queue: e.q.Name(), Consumers: e.consumers, Depth: st.Depth,
			MaxQueued: e.bound, Overflowed: st.Overflowed, Owner: e.owner,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// loadSubscriptions opens the durable subscriptions' queues, and drops
// the queues of the non-durable subscriptions a crash left behind (their
// consumers are gone with the process). Dead-letter queues are kept: what
// they hold is for an operator to look at.
func (n *Node) loadSubscriptions(ctx context.Context) error {
	recs, err := loadRecords(ctx, n, metaSubscriptions, metaSubscriptionPrefix, func(r durableRecord) string { return metaSubscriptionPrefix + r.Name })
	if err != nil {
		return fmt.Errorf("load subscriptions: %w", err)
	}
	t := n.topics
	for _, r := range recs {
		p, err := address.ParsePattern(r.Pattern)
		if err != nil {
			return fmt.Errorf("load subscription %q: %w", r.Name, err)
		}
		if !t.inSpace(p) {
			n.log.Warn("durable subscription outside every topic space; it gets nothing until its space is declared again",
				slog.String("subscription", r.Name), slog.String("pattern", r.Pattern))
		}
		if queue.IsDeadLetter(r.Name) {
			// Made by an older build, which took such names. It is kept
			// with what it holds, but an operator must take it apart.
			n.log.Warn("durable subscription named like a dead-letter queue, made by an older version: its queue is also the dead-letter queue of another subscription, whose dead letters it takes and whose dlq list and replay take its messages; receive what it holds, unsubscribe it and subscribe under another name",
				slog.String("subscription", r.Name), slog.String("queue", subQueuePrefix+r.Name),
				slog.String("dead_letters_of", strings.TrimSuffix(r.Name, queue.DeadLetterSuffix)))
		}
		q, err := n.store.Queue(ctx, subQueuePrefix+r.Name, queue.KindReceive)
		if err != nil {
			return fmt.Errorf("load subscription %q: %w", r.Name, err)
		}
		e := &subEntry{name: r.Name, pattern: p, durable: true, q: q, unclaimed: r.Owner == nil}
		if r.Owner != nil {
			// Only a remote client's count against its identity's
			// bound; they never have the gateway's names, and the
			// gateway's own have an owner too.
			e.owner = *r.Owner
			e.counted = e.owner != "" && !strings.HasPrefix(e.name, mqttgw.SessionPrefix) && !strings.HasPrefix(e.name, mqttgw.SharePrefix)
		}
		t.mu.Lock()
		t.addSub(e)
		t.matched.forget()
		t.mu.Unlock()
	}
	for _, q := range n.store.Queues() {
		name, isSub := strings.CutPrefix(q.Name(), subQueuePrefix)
		if !isSub || queue.IsDeadLetter(name) || t.subs[name] != nil {
			continue
		}
		if _, err := n.store.Drop(ctx, q); err != nil {
			return fmt.Errorf("drop subscription %q left by a crash: %w", name, err)
		}
	}
	return n.openKeeps(ctx)
}

// isClosed reports whether the node began to close.
func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// subConsumer is the consumeBackend of a subscription's Consumer: a
// queueConsumer of its queue that, on close, gives back what it holds as
// any does, then ends a non-durable subscription once no other consumer
// shares it.
type subConsumer struct {
	*queueConsumer
	e    *subEntry
	once sync.Once
}

func (c *subConsumer) close() {
	c.queueConsumer.close()
	c.once.Do(func() {
		n, t := c.n, c.n.topics
		t.subMu.Lock()
		defer t.subMu.Unlock()
		c.e.consumers--
		if c.e.durable || c.e.consumers > 0 {
			return
		}
		if _, err := n.dropSubscription(context.Background(), c.e); err != nil && !errors.Is(err, ErrClosed) {
			n.log.Error("delete non-durable subscription", slog.String("subscription", c.e.name), slog.Any(logkey.Error, err))
		}
	})
}

// validateTopics checks the topic spaces: each pattern parses, and no
// declared address is a topic, which would make it two things at once.
func (c Config) validateTopics() error {
	t, err := newTopics(c.Topics)
	if err != nil {
		return cfgErr("topics", err.Error(), err)
	}
	if c.TopicInterestGrace < 0 {
		return cfgErr("topic_interest_grace", fmt.Sprintf("%s is negative; leave it out for the default %s", c.TopicInterestGrace, DefaultTopicInterestGrace), nil)
	}
	switch c.TopicForwardOverflow {
	case "", overflowDropNew, overflowDropOldest:
	default:
		return cfgErr("topic_forward_overflow", fmt.Sprintf("%q: want %s or %s", c.TopicForwardOverflow, overflowDropNew, overflowDropOldest), nil)
	}
	if m := c.TopicForwardMaxQueued; m != 0 {
		window := int64(cmp.Or(max(c.Link.Window, 0), defaultLinkWindow))
		if m < window {
			return cfgErr("topic_forward_max_queued", fmt.Sprintf("%d is below the %d messages a link keeps in flight (link.window): a link that keeps up would drop publishes; set at least %d, or 0 for no bound but the store's", m, window, window), nil)
		}
	}
	for _, a := range c.Addresses {
		if err := reservedName(a.Name); err != nil {
			return cfgErr("addresses", err.Error(), err)
		}
		if t.isTopic(a.Name) {
			return cfgErr("addresses", fmt.Sprintf("address %q is declared, but a topic space's pattern matches it: a name is an address or a topic, not both", a.Name), nil)
		}
		if err := t.misnamed(a.Name); err != nil {
			return cfgErr("addresses", err.Error(), err)
		}
	}
	return nil
}

// subscriptionQueue returns the subscription queue that addr names, itself
// or through its dead-letter queue ("sub:audit", "sub:audit.dlq"); nil
// when addr names none.
func (n *Node) subscriptionQueue(addr string) *queue.Queue {
	name, ok := strings.CutPrefix(strings.TrimSuffix(addr, queue.DeadLetterSuffix), subQueuePrefix)
	if !ok {
		return nil
	}
	n.topics.mu.RLock()
	defer n.topics.mu.RUnlock()
	if e := n.topics.subs[name]; e != nil {
		return e.q
	}
	return nil
}
