package petrel

import "github.com/prometheus/client_golang/prometheus"

var (
	descTopicPublished = prometheus.NewDesc("petrel_topic_published_total",
		"Publishes to topics fanned out on this node, since it started.", nil, nil)
	descTopicUnrouted = prometheus.NewDesc("petrel_topic_unrouted_total",
		"Publishes to topics that matched no subscription and were dropped, since the node started.", nil, nil)
	descTopicSubscriptions = prometheus.NewDesc("petrel_topic_subscriptions",
		"Subscriptions to topics on this node.", []string{"durable"}, nil)
)

// topicCollector reads the topics' figures at scrape time.
type topicCollector struct{ t *topics }

// Describe implements prometheus.Collector.
func (topicCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTopicPublished
	ch <- descTopicUnrouted
	ch <- descTopicSubscriptions
}

// Collect implements prometheus.Collector.
func (c topicCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- counter(descTopicPublished, c.t.published.Load())
	ch <- counter(descTopicUnrouted, c.t.unrouted.Load())
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
