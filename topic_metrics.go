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
	descTopicPruned = prometheus.NewDesc("petrel_topic_pruned_total",
		"Publishes dropped from the send queue toward a neighbour because the interest they waited for went away: withdrawn by its subscriber (unsubscribed), or non-durable and its link down past topic_interest_grace (grace), since the node started.", []string{"reason"}, nil)
	descTopicInterest = prometheus.NewDesc("petrel_topic_interest",
		"Pieces of topic interest this node learned from its neighbours.", nil, nil)
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
}

// Collect implements prometheus.Collector.
func (c topicCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- counter(descTopicPublished, c.t.published.Load())
	ch <- counter(descTopicUnrouted, c.t.unrouted.Load())
	ch <- counter(descTopicForwarded, c.t.forwarded.Load())
	ch <- counter(descTopicInterestDropped, c.t.interestDropped.Load())
	ch <- counter(descTopicPruned, c.t.prunedUnsub.Load(), pruneUnsubscribed)
	ch <- counter(descTopicPruned, c.t.prunedGrace.Load(), pruneGrace)
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
	ch <- gauge(descTopicSubscriptions, durable, "true")
	ch <- gauge(descTopicSubscriptions, other, "false")
}
