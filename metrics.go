package petrel

import (
	"time"

	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/sender"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// commitMetrics are the store's two histograms. The store's OnCommit hook
// feeds them, so they exist before the node does: fx builds them first and
// hands them to both the store's configuration and the node.
type commitMetrics struct {
	batch   prometheus.Histogram
	latency prometheus.Histogram
}

func newCommitMetrics() *commitMetrics {
	return &commitMetrics{
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "petrel_store_commit_batch_size",
			Help:    "Requests carried by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13), // 1 .. 4096, MaxBatch's default
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "petrel_store_commit_duration_seconds",
			Help:    "Time spent in COMMIT, the fsync in full sync mode.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs .. 3.3s
		}),
	}
}

// hook is the store's OnCommit hook; next is the embedder's own, if any.
func (m *commitMetrics) hook(next func(int, time.Duration)) func(int, time.Duration) {
	return func(requests int, took time.Duration) {
		m.batch.Observe(float64(requests))
		m.latency.Observe(took.Seconds())
		if next != nil {
			next(requests, took)
		}
	}
}

// newRegistry makes the node's own registry. It is not the global default
// registry, so several nodes in one process each serve their own figures.
func newRegistry(n *Node, cm *commitMetrics) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		nodeCollector{n},
		identityCollector{n},
		cm.batch, cm.latency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// nodeCollector reads the node's figures at scrape time, so nothing is
// counted twice: the queues, links, receiver and store keep their own
// counters, and a scrape copies them.
type nodeCollector struct{ n *Node }

var (
	queueLabels = []string{"queue"}
	linkLabels  = []string{"queue", "next_hop"}

	descQueueDepth = prometheus.NewDesc("petrel_queue_depth",
		"Messages stored in the queue, in flight included.", queueLabels, nil)
	descQueueInFlight = prometheus.NewDesc("petrel_queue_in_flight",
		"Messages delivered to consumers and not yet settled.", queueLabels, nil)
	// The queue counters are stored with the queue: they count since it
	// was created and survive restarts, unlike most Prometheus counters.
	descQueueMessages = prometheus.NewDesc("petrel_queue_messages_total",
		"Messages by event since the queue was created; persists across restarts.",
		[]string{"queue", "event"}, nil)

	descQueueOverflowed = prometheus.NewDesc("petrel_queue_overflowed_total",
		"Copies a topic subscription dropped at its bound (topics[].max_queued_messages), or a neighbour's send queue for topic traffic past topic_forward_max_queued, since the queue was made; persisted.",
		queueLabels, nil)

	descLinkUp = prometheus.NewDesc("petrel_link_up",
		"1 if the link's sender is connected, 0 otherwise.", linkLabels, nil)
	descLinkReconnects = prometheus.NewDesc("petrel_link_reconnects_total",
		"Times the link's sender reconnected since the node started.", linkLabels, nil)
	descLinkMessages = prometheus.NewDesc("petrel_link_messages_total",
		"Messages by event on the link since the node started.",
		[]string{"queue", "next_hop", "event"}, nil)
	descLinkInFlight = prometheus.NewDesc("petrel_link_in_flight",
		"Messages sent on the link and not yet acknowledged.", linkLabels, nil)
	descLinkConnections = prometheus.NewDesc("petrel_link_connections",
		"Connections the node's links hold to a neighbour: one, and another for each 1024 sessions (send queues, file transfers) past the first connection's.", []string{"next_hop"}, nil)
	descLinkInFlightBytes = prometheus.NewDesc("petrel_link_in_flight_bytes",
		"Encoded bytes of the messages sent on the link and not yet acknowledged (link.window_bytes bounds them).", linkLabels, nil)

	descRecvConnections = prometheus.NewDesc("petrel_receiver_connections_total",
		"Connections the receiver accepted since the node started.", nil, nil)
	descRecvHandshakeFailed = prometheus.NewDesc("petrel_receiver_handshake_failures_total",
		"Connections whose handshake failed.", nil, nil)
	descRecvAuthFailed = prometheus.NewDesc("petrel_receiver_auth_failures_total",
		"Connections refused at authentication: a wrong or missing secret, or a name the client's certificate does not carry.", nil, nil)
	descRecvSessionsRefused = prometheus.NewDesc("petrel_receiver_sessions_refused_total",
		"Sessions the receiver refused to open, by reason: max_sessions (past the 1024 sessions one connection holds), identity (past link.max_sessions_per_identity, one client identity's sessions on all its connections), policy (an address, identity or access rule the node refuses).",
		[]string{"reason"}, nil)
	descRecvAcceptErrors = prometheus.NewDesc("petrel_receiver_accept_errors_total",
		"Accept errors of the link listener that pass (out of file descriptors and the like), each retried after a wait that doubles up to a second.", nil, nil)
	descRecvTLSFailed = prometheus.NewDesc("petrel_receiver_tls_failures_total",
		"Connections that failed the TLS handshake: plain TCP, or no or an untrusted certificate.", nil, nil)
	descAccessDenied = prometheus.NewDesc("petrel_access_denied_total",
		"Actions the access rules denied since the node started, by action.", []string{"action"}, nil)
	descRecvProtocolErrors = prometheus.NewDesc("petrel_receiver_protocol_errors_total",
		"Connections closed for a protocol error.", nil, nil)
	descRecvStoreFull = prometheus.NewDesc("petrel_receiver_store_full_total",
		"Sessions of links and clients the receiver ended because its store had no room for what they carried; their senders try again.", nil, nil)
	descRecvMessages = prometheus.NewDesc("petrel_receiver_messages_total",
		"Messages the receiver handled, by event, since the node started.", []string{"event"}, nil)

	descForgedOrigins = prometheus.NewDesc("petrel_forged_origin_total",
		"Messages refused because their peer may not speak for their origin: not its own id, and it is not a permitted relay.", nil, nil)
	descRoutingLoops = prometheus.NewDesc("petrel_routing_loops_total",
		"Messages refused because they were going round a routing loop: the route to their destination led back to the peer that handed them over, or they were this node's own.", nil, nil)
	descClientLinkRefused = prometheus.NewDesc("petrel_client_link_sessions_refused_total",
		"Link and file sessions that client identities tried to open, refused.", nil, nil)

	descStoreCommits = prometheus.NewDesc("petrel_store_commits_total",
		"Group commits since the store opened.", nil, nil)
	descStoreRequests = prometheus.NewDesc("petrel_store_commit_requests_total",
		"Requests carried by the group commits since the store opened.", nil, nil)

	descFileBytes = prometheus.NewDesc("petrel_file_bytes_total",
		"File content bytes since the node started: sent (acknowledged by next hops) and received.",
		[]string{"direction"}, nil)
	descFileActive = prometheus.NewDesc("petrel_file_transfers_active",
		"File transfers under way: sending, and receiving (paused ones included while the connection they came on is up).", []string{"direction"}, nil)
	descFiles = prometheus.NewDesc("petrel_files_total",
		"Files by event since the node started: handed over to a next hop, failed for good, forwarded early (a relay's cut-through), taken here, refused, corrupt.",
		[]string{"event"}, nil)

	descFilesOutsideSession = prometheus.NewDesc("petrel_files_outside_session_total",
		"File messages refused because they came in an ordinary session, not as a file session's announcement.", nil, nil)
	descNoticesDenied = prometheus.NewDesc("petrel_file_notices_denied_total",
		"File notices not sent because the peer that handed the file over may not send to their address.", nil, nil)
	descOutboxWatching = prometheus.NewDesc("petrel_outbox_watching",
		"1 while an outbox folder is watched, 0 while it is removed or renamed away (the node watches it again once it is back).",
		[]string{"dir"}, nil)
	descOutboxStuck = prometheus.NewDesc("petrel_outbox_stuck_files",
		"Files of an outbox folder that were sent (or failed) but could not be moved out of it into sent/ or failed/; the move is tried again after a wait that doubles up to 10 minutes.",
		[]string{"dir"}, nil)
	descPathsRefused = prometheus.NewDesc("petrel_file_paths_refused_total",
		"File messages failed, and cleanups skipped, because a path was not one the node derives from its own records.", nil, nil)
)

// Describe implements prometheus.Collector.
func (nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descQueueDepth, descQueueInFlight, descQueueMessages, descQueueOverflowed,
		descLinkUp, descLinkReconnects, descLinkMessages, descLinkInFlight, descLinkInFlightBytes, descLinkConnections,
		descRecvConnections, descRecvHandshakeFailed, descRecvAuthFailed, descRecvSessionsRefused,
		descRecvProtocolErrors, descRecvStoreFull, descRecvMessages, descRecvTLSFailed, descRecvAcceptErrors, descAccessDenied,
		descStoreCommits, descStoreRequests, descForgedOrigins, descRoutingLoops, descClientLinkRefused,
		descFileBytes, descFileActive, descFiles,
		descFilesOutsideSession, descNoticesDenied, descPathsRefused, descOutboxWatching, descOutboxStuck,
	} {
		ch <- d
	}
	for _, d := range boundDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.n.QueueStats() {
		collectQueue(ch, q)
	}
	var fs sender.FileStats
	var sending int
	if c.n.mgr != nil {
		for _, l := range c.n.Links() {
			collectLink(ch, l)
			fs.Bytes += l.Files.Bytes
			fs.Done += l.Files.Done
			fs.Failed += l.Files.Failed
			fs.Early += l.Files.Early
			sending += len(l.Files.Active)
		}
		for hop, n := range c.n.mgr.Pool().Connections() {
			ch <- gauge(descLinkConnections, int64(n), hop)
		}
	}
	rs := c.n.ReceiverStats()
	collectReceiver(ch, rs)
	as := c.n.AccessStats()
	for action, v := range as.Denied {
		ch <- counter(descAccessDenied, v, string(action))
	}
	ch <- counter(descNoticesDenied, as.NoticesDenied)
	ch <- counter(descPathsRefused, as.PathsRefused)
	ch <- counter(descFilesOutsideSession, rs.FilesOutsideSession)
	ch <- counter(descFileBytes, fs.Bytes, "sent")
	ch <- counter(descFileBytes, rs.FileBytes, "received")
	ch <- gauge(descFileActive, int64(sending), "sending")
	ch <- gauge(descFileActive, int64(len(c.n.Transfers())), "receiving")
	ch <- counter(descFiles, fs.Done, "handed_over")
	ch <- counter(descFiles, fs.Failed, "failed")
	ch <- counter(descFiles, fs.Early, "forwarded_early")
	ch <- counter(descFiles, rs.FilesTaken, "taken")
	ch <- counter(descFiles, rs.FilesRefused, "refused")
	ch <- counter(descFiles, rs.FilesCorrupt, "corrupt")
	c.n.outboxes.mu.Lock()
	for dir, r := range c.n.outboxes.run {
		var v int64
		if r.ob.Watching() {
			v = 1
		}
		ch <- gauge(descOutboxWatching, v, dir)
		ch <- gauge(descOutboxStuck, int64(r.ob.Stuck()), dir)
	}
	c.n.outboxes.mu.Unlock()
	ws := c.n.store.WriterStats()
	ch <- counter(descStoreCommits, ws.Commits)
	ch <- counter(descStoreRequests, ws.Requests)
	collectBounds(ch, c.n)
}

func collectQueue(ch chan<- prometheus.Metric, q queue.Stats) {
	ch <- gauge(descQueueDepth, q.Depth, q.Name)
	ch <- gauge(descQueueInFlight, q.InFlight, q.Name)
	for _, e := range []struct {
		event string
		v     int64
	}{
		{"enqueued", q.Enqueued}, {"acked", q.Acked}, {"expired", q.Expired},
		{"deduplicated", q.Deduped}, {"dead_lettered", q.DeadLettered},
	} {
		ch <- counter(descQueueMessages, e.v, q.Name, e.event)
	}
	if q.Overflowed > 0 {
		ch <- counter(descQueueOverflowed, q.Overflowed, q.Name)
	}
}

func collectLink(ch chan<- prometheus.Metric, l sender.Status) {
	var up int64
	if l.State == sender.StateConnected {
		up = 1
	}
	ch <- gauge(descLinkUp, up, l.Queue, l.NextHop)
	ch <- counter(descLinkReconnects, l.Reconnects, l.Queue, l.NextHop)
	ch <- gauge(descLinkInFlight, l.InFlight, l.Queue, l.NextHop)
	ch <- gauge(descLinkInFlightBytes, l.InFlightBytes, l.Queue, l.NextHop)
	ch <- counter(descLinkMessages, l.Sent, l.Queue, l.NextHop, "sent")
	ch <- counter(descLinkMessages, l.Acked, l.Queue, l.NextHop, "acked")
	ch <- counter(descLinkMessages, l.Refused, l.Queue, l.NextHop, "refused")
}

func collectReceiver(ch chan<- prometheus.Metric, r ReceiverStats) {
	ch <- counter(descRecvConnections, r.Connections)
	ch <- counter(descRecvHandshakeFailed, r.HandshakeFailed)
	ch <- counter(descRecvAuthFailed, r.AuthFailed)
	ch <- counter(descRecvTLSFailed, r.TLSFailed)
	ch <- counter(descRecvAcceptErrors, r.AcceptErrors)
	ch <- counter(descRecvSessionsRefused, r.SessionsRefused-r.SessionsOverLimit-r.SessionsOverIdentity, "policy")
	ch <- counter(descRecvSessionsRefused, r.SessionsOverLimit, "max_sessions")
	ch <- counter(descRecvSessionsRefused, r.SessionsOverIdentity, "identity")
	ch <- counter(descRecvProtocolErrors, r.ProtocolErrors)
	ch <- counter(descRecvStoreFull, r.StoreFull)
	ch <- counter(descRecvMessages, r.Received, "received")
	ch <- counter(descRecvMessages, r.Stored, "stored")
	ch <- counter(descRecvMessages, r.Deduped, "deduplicated")
	ch <- counter(descRecvMessages, r.Refused, "refused")
	ch <- counter(descForgedOrigins, r.ForgedOrigins)
	ch <- counter(descRoutingLoops, r.RoutingLoops)
	ch <- counter(descClientLinkRefused, r.ClientLinkRefused)
}

func counter(d *prometheus.Desc, v int64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(d *prometheus.Desc, v int64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
}
