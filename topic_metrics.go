package petrel

import "github.com/prometheus/client_golang/prometheus"

var (
	descTopicPublished = prometheus.NewDesc("petrel_topic_published_total",
		"Publishes to topics fanned out on this node, since it started.", nil, nil)
	descTopicUnrouted = prometheus.NewDesc("petrel_topic_unrouted_total",
		"Publishes to topics that matched no subscription and were dropped, since the node started.", nil, nil)
	descTopicSubscriptions = prometheus.NewDesc("petrel_topic_subscriptions",
		"Subscriptions to topics on this node.", []string{"durable"}, nil)
	descTopicForwarded = prometheus.NewDesc("petrel_topic_forwarded_total",
		"Copies of topic publishes queued toward neighbours with matching interest (one per next hop), since the node started.", nil, nil)
	descTopicInterestDropped = prometheus.NewDesc("petrel_topic_interest_dropped_total",
		"Topic interest and forwards not taken or not sent: malformed, looped back, past the hop limit, or toward a node with no route, since the node started.", nil, nil)
	descTopicInterestDenied = prometheus.NewDesc("petrel_topic_interest_denied_total",
		"Topic interest refused because the neighbour that handed it over may not subscribe to its pattern (access rules), since the node started; also in petrel_topic_interest_dropped_total and petrel_access_denied_total.", nil, nil)
	descTopicPruned = prometheus.NewDesc("petrel_topic_pruned_total",
		"Publishes dropped from the send queue toward a neighbour because the interest they waited for went away: withdrawn by its subscriber (unsubscribed), or non-durable and its link down past topic_interest_grace (grace), since the node started.", []string{"reason"}, nil)
	descTopicPruneRuns = prometheus.NewDesc("petrel_topic_prune_runs_total",
		"Reads of the send queue toward a neighbour to prune it, since the node started: withdrawals from one neighbour that arrive within the janitor's gap (at least 500 ms, and nine times the last run) make one.", nil, nil)
	descTopicReleased = prometheus.NewDesc("petrel_topic_released_queues_total",
		"Send queues of topic interest dropped, with their senders, toward discovered nodes that left the directory and were owed nothing, since the node started.", nil, nil)
	descTopicKept = prometheus.NewDesc("petrel_topic_kept_total",
		"Publishes that matched no subscription and were held by their topic space's keep policy, since the node started.", nil, nil)
	descTopicKeepTaken = prometheus.NewDesc("petrel_topic_keep_taken_total",
		"Held publishes that a new durable subscription took, since the node started.", nil, nil)
	descTopicKeepDropped = prometheus.NewDesc("petrel_topic_keep_dropped_total",
		"Held publishes dropped past their keep policy's bound (messages: the oldest past the count; age: older than the age), since the node started.", []string{"reason"}, nil)
	descTopicKeepHeld = prometheus.NewDesc("petrel_topic_keep_held",
		"Publishes a topic space's keep policy holds now.", []string{"space"}, nil)
	descTopicInterest = prometheus.NewDesc("petrel_topic_interest",
		"Pieces of topic interest this node learned from its neighbours.", nil, nil)
	descTopicMatchCache = prometheus.NewDesc("petrel_topic_match_cache_entries",
		"Topic names whose matching subscriptions the node keeps for the next publish (at most 4096; emptied whenever a subscription comes or goes).", nil, nil)
	descTopicMatchFallbacks = prometheus.NewDesc("petrel_topic_match_fallbacks_total",
		"Matches of a topic name that gave up on the index of patterns past its bound of visits (65,536) and matched each subscription's or learned interest's pattern instead, since the node started.", nil, nil)
	descTopicAnnounceRetries = prometheus.NewDesc("petrel_topic_announce_retries",
		"Patterns of this node's subscriptions whose announcement or withdrawal to the neighbours failed (the store refused it: full) and that the topic janitor tries again at each tick.", nil, nil)
	descTopicSubsRefused = prometheus.NewDesc("petrel_topic_subscriptions_refused_total",
		"Subscribes refused to remote clients and MQTT clients, since the node started, by reason: taken (the name is another identity's subscription), reserved (a remote client named an MQTT gateway subscription: mqtt. or mqtt-share.), identity (the identity's remote clients own max_subscriptions_per_identity subscriptions already).", []string{"reason"}, nil)
	descTopicMatchHits = prometheus.NewDesc("petrel_topic_match_cache_hits_total",
		"Publishes whose subscriptions were found in that cache rather than by matching every pattern, since the node started.", nil, nil)
)

// topicCollector reads the topics' figures at scrape time.
type topicCollector struct{ t *topics }

// Describe implements prometheus.Collector.
func (topicCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTopicPublished
	ch <- descTopicUnrouted
	ch <- descTopicSubscriptions
	ch <- descTopicForwarded
	ch <- descTopicInterestDropped
	ch <- descTopicInterest
	ch <- descTopicPruned
	ch <- descTopicPruneRuns
	ch <- descTopicReleased
	ch <- descTopicKept
	ch <- descTopicKeepTaken
	ch <- descTopicKeepDropped
	ch <- descTopicKeepHeld
	ch <- descTopicInterestDenied
	ch <- descTopicMatchCache
	ch <- descTopicMatchHits
	ch <- descTopicMatchFallbacks
	ch <- descTopicAnnounceRetries
	ch <- descTopicSubsRefused
}

// Collect implements prometheus.Collector.
func (c topicCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- counter(descTopicPublished, c.t.published.Load())
	ch <- counter(descTopicUnrouted, c.t.unrouted.Load())
	ch <- counter(descTopicForwarded, c.t.forwarded.Load())
	ch <- counter(descTopicInterestDropped, c.t.interestDropped.Load())
	ch <- counter(descTopicPruned, c.t.prunedUnsub.Load(), pruneUnsubscribed)
	ch <- counter(descTopicPruned, c.t.prunedGrace.Load(), pruneGrace)
	ch <- counter(descTopicPruneRuns, c.t.pruneRuns.Load())
	ch <- counter(descTopicReleased, c.t.released.Load())
	ch <- counter(descTopicKept, c.t.kept.Load())
	ch <- counter(descTopicSubsRefused, c.t.refusedOwner.Load(), "taken")
	ch <- counter(descTopicSubsRefused, c.t.refusedReserved.Load(), "reserved")
	ch <- counter(descTopicSubsRefused, c.t.refusedBound.Load(), "identity")
	ch <- counter(descTopicInterestDenied, c.t.interestDenied.Load())
	ch <- counter(descTopicKeepTaken, c.t.keepTaken.Load())
	ch <- counter(descTopicKeepDropped, c.t.keepDroppedCount.Load(), keepDropCount)
	ch <- counter(descTopicKeepDropped, c.t.keepDroppedAge.Load(), keepDropAge)
	for _, k := range c.t.keeps {
		if k.q != nil {
			ch <- gauge(descTopicKeepHeld, k.q.Stats().Depth, k.pattern.String())
		}
	}
	c.t.remote.mu.RLock()
	learned := int64(len(c.t.remote.learned))
	c.t.remote.mu.RUnlock()
	ch <- gauge(descTopicInterest, learned)
	var durable, other int64
	c.t.mu.RLock()
	for _, e := range c.t.subs {
		if e.durable {
			durable++
		} else {
			other++
		}
	}
	c.t.mu.RUnlock()
	ch <- gauge(descTopicMatchCache, int64(c.t.matched.size()))
	ch <- counter(descTopicMatchHits, c.t.matched.hits.Load())
	ch <- counter(descTopicMatchFallbacks, c.t.fallbacks.Load()+c.t.remote.fallbacks.Load())
	ch <- gauge(descTopicAnnounceRetries, c.t.remote.retries.Load())
	ch <- gauge(descTopicSubscriptions, durable, "true")
	ch <- gauge(descTopicSubscriptions, other, "false")
}

// TopicsStatus is the topics part of Status: what `petrel stat` shows of
// them. Its counters are those of the metrics, since the node started.
type TopicsStatus struct {
	Spaces        []TopicSpaceStatus `json:"spaces"`
	Subscriptions []SubscriptionInfo `json:"subscriptions"`
	// Interest is how many pieces of interest the node learned from its
	// neighbours (Node.TopicInterest lists them).
	Interest  int   `json:"interest"`
	Published int64 `json:"published"`
	Unrouted  int64 `json:"unrouted"`
	Forwarded int64 `json:"forwarded"`
	// Pruned counts the publishes dropped from send queues for interest
	// that went away; KeepDropped the held ones dropped past a bound.
	Pruned      int64 `json:"pruned"`
	Kept        int64 `json:"kept"`
	KeepDropped int64 `json:"keep_dropped"`
}

// TopicSpaceStatus is one topic space, with its keep policy, if any, and
// how many publishes that holds.
type TopicSpaceStatus struct {
	Pattern string    `json:"pattern"`
	Keep    TopicKeep `json:"keep"`
	Held    int64     `json:"held"`
	// MaxQueued is the space's bound on each subscription
	// (TopicConfig.MaxQueuedMessages), 0 for none.
	MaxQueued int64 `json:"max_queued,omitempty"`
}

func (n *Node) topicsStatus() TopicsStatus {
	t := n.topics
	st := TopicsStatus{
		Spaces: []TopicSpaceStatus{}, Subscriptions: n.Subscriptions(),
		Published: t.published.Load(), Unrouted: t.unrouted.Load(), Forwarded: t.forwarded.Load(),
		Pruned: t.prunedUnsub.Load() + t.prunedGrace.Load(), Kept: t.kept.Load(),
		KeepDropped: t.keepDroppedCount.Load() + t.keepDroppedAge.Load(),
	}
	for i, p := range t.spaces {
		sp := TopicSpaceStatus{Pattern: p.String(), MaxQueued: t.maxQueued[i]}
		for _, k := range t.keeps {
			if k.pattern.String() == sp.Pattern && k.q != nil {
				sp.Keep, sp.Held = k.cfg, k.q.Stats().Depth
			}
		}
		st.Spaces = append(st.Spaces, sp)
	}
	t.remote.mu.RLock()
	st.Interest = len(t.remote.learned)
	t.remote.mu.RUnlock()
	return st
}
