package petrel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the node's resource bounds; see the README's "Bounded
// resources" for the full table.
const (
	// DefaultMaxAutoQueues is the default of Config.MaxAutoQueues.
	DefaultMaxAutoQueues = 10000
	// DefaultMaxSubscriptionsPerIdentity is the default of
	// Config.MaxSubscriptionsPerIdentity, lowered to a tenth of
	// MaxAutoQueues where that is less.
	DefaultMaxSubscriptionsPerIdentity = 1000
	// DefaultMaxSpoolBytes is the default of FilesConfig.MaxSpoolBytes;
	// a peer's share defaults to half of it.
	DefaultMaxSpoolBytes = 64 << 30
)

// ErrTooManyQueues is returned when creating an undeclared address would
// take the node past Config.MaxAutoQueues. A peer's message gets it as a
// refusal for good (it wraps receiver.ErrRefused too); declare the
// address, or raise max_auto_queues.
var ErrTooManyQueues = errors.New("too many auto-created queues")

// spoolQuota is the files configuration's quota, with its defaults.
func (n *Node) spoolQuota() filetransfer.Quota {
	q := filetransfer.Quota{Max: n.cfg.Files.MaxSpoolBytes, PerPeer: n.cfg.Files.MaxSpoolBytesPerPeer, Held: n.heldRoot()}
	if q.Max <= 0 {
		q.Max = DefaultMaxSpoolBytes
	}
	if q.PerPeer <= 0 {
		q.PerPeer = q.Max / 2
	}
	return q
}

// maxAutoQueues is Config.MaxAutoQueues with its default.
func (n *Node) maxAutoQueues() int {
	if m := n.cfg.MaxAutoQueues; m > 0 {
		return m
	}
	return DefaultMaxAutoQueues
}

// maxSubscriptionsPerIdentity is Config.MaxSubscriptionsPerIdentity with
// its default: 1000, or a tenth of max_auto_queues where that is less, so
// that one identity left at the default never takes the node's whole
// budget of queues (at max_auto_queues 300, one identity made all 300).
func (n *Node) maxSubscriptionsPerIdentity() int {
	if m := n.cfg.MaxSubscriptionsPerIdentity; m > 0 {
		return m
	}
	return max(1, min(DefaultMaxSubscriptionsPerIdentity, n.maxAutoQueues()/10))
}

// autoCreateRoom returns nil when one more undeclared receive queue, name,
// may be created; n.autoMu is held. Undeclared queues are counted from the
// store, so a queue removed or declared since gives its room back. This
// runs only when a queue is about to be created, never per message to a
// queue that exists.
//
// The node's own queues are not counted: the topic inbox, which topics
// make, and the queues of the topic spaces' keep policies, which the
// configuration declares. Subscriptions are: each is made on a peer's,
// a client's or an application's request.
func (n *Node) autoCreateRoom(name string) error {
	limit := n.maxAutoQueues()
	n.mu.Lock()
	count := 0
	for _, q := range n.store.Queues() {
		qn := q.Name()
		if qn == topicInbox || strings.HasPrefix(qn, keepQueuePrefix) {
			continue
		}
		if _, declared := n.addresses[qn]; !declared && q.Kind() == queue.KindReceive {
			count++
		}
	}
	n.mu.Unlock()
	if count < limit {
		return nil
	}
	n.autoRefused.Add(1)
	return fmt.Errorf("%w: %w: address %q is not declared on node %s, which holds %d undeclared queues already (max_auto_queues); declare it or raise the limit",
		receiver.ErrRefused, ErrTooManyQueues, name, n.cfg.Name, count)
}

// The bounds' metrics; nodeCollector describes and collects them.
var (
	descConnsRejected = prometheus.NewDesc("petrel_connections_rejected_total",
		"Inbound connections closed at accept by a bound, by reason: handshakes (link.max_handshakes), handshakes_per_ip (link.max_handshakes_per_ip), connections (link.max_connections); and identity, those refused at their handshake past link.max_connections_per_identity.",
		[]string{"reason"}, nil)
	descConnsOpen = prometheus.NewDesc("petrel_connections_open",
		"Inbound connections open now, by state: handshaking or authenticated.", []string{"state"}, nil)
	descClientSessions = prometheus.NewDesc("petrel_receiver_client_sessions",
		"Publish and subscribe sessions that client identities hold open now, all together (each identity's bounded by link.max_sessions_per_identity).", nil, nil)
	descConnBuffered = prometheus.NewDesc("petrel_receiver_buffered_bytes",
		"Bytes of messages received and not yet taken for storing, all inbound connections together (each bounded by link.max_conn_buffer_bytes).", nil, nil)
	descReadPauses = prometheus.NewDesc("petrel_receiver_read_pauses_total",
		"Times an inbound connection stopped reading because it held link.max_conn_buffer_bytes.", nil, nil)
	descClientHeld = prometheus.NewDesc("petrel_receiver_held_bytes",
		"Bytes of the messages leased to remote clients' consumers and not yet settled, all together (each bounded by link.max_subscription_held_bytes, all by link.max_held_bytes).", nil, nil)
	descClientHeldWaits = prometheus.NewDesc("petrel_receiver_held_waits_total",
		"Times a remote client's consumer stopped being delivered to because it, or all together, held link.max_subscription_held_bytes or link.max_held_bytes.", nil, nil)
	descSpoolUsed = prometheus.NewDesc("petrel_spool_used_bytes",
		"Spool space the files being received take, each at its announced size.", nil, nil)
	descSpoolHeld = prometheus.NewDesc("petrel_spool_held_bytes",
		"Spool space of the files a relay holds until it has forwarded them, as last read; it counts against files.max_spool_bytes.", nil, nil)
	descSpoolQuota = prometheus.NewDesc("petrel_spool_quota_bytes",
		"The spool quota: files.max_spool_bytes (scope total) and files.max_spool_bytes_per_peer (scope peer).", []string{"scope"}, nil)
	descSpoolQuotaEvents = prometheus.NewDesc("petrel_spool_quota_total",
		"Files the spool quota held back, by outcome: paused (waits for room, the sender tries again) or refused (larger than the quota).",
		[]string{"outcome"}, nil)
	descAutoRefused = prometheus.NewDesc("petrel_auto_create_refused_total",
		"Undeclared addresses not created because max_auto_queues undeclared queues exist.", nil, nil)
	descPrefetched = prometheus.NewDesc("petrel_store_prefetch_bytes",
		"Memory the queues hold ready for consumers, all queues together, each message counted with its bookkeeping (bounded by store.prefetch_total_bytes).", nil, nil)
	descPrefetchLimit = prometheus.NewDesc("petrel_store_prefetch_limit_bytes",
		"The bound on petrel_store_prefetch_bytes: store.prefetch_total_bytes.", nil, nil)
	descDiscoveryNodes = prometheus.NewDesc("petrel_discovery_nodes",
		"Nodes discovery keeps in the directory now (at most discovery.max_nodes).", nil, nil)
	descDiscoveryFull = prometheus.NewDesc("petrel_discovery_dropped_full_total",
		"Announcements of new nodes dropped because the directory held discovery.max_nodes.", nil, nil)
	descDiscoveryDropped = prometheus.NewDesc("petrel_discovery_dropped_total",
		"Discovery datagrams dropped, by reason: malformed (not an announcement), bad_mac (not signed with this node's secret), unusable (no connector this node can dial), stale (not newer than the last announcement of its node: a replay). Forged traffic shows here; it restarts from 0 when discovery restarts.",
		[]string{"reason"}, nil)
	descTransfersEvicted = prometheus.NewDesc("petrel_file_transfers_evicted_total",
		"Paused received file transfers dropped from the list past its bounds (64 per peer, 4096 in all), paused longest ago first; the transfer itself still resumes.", nil, nil)
)

var boundDescs = []*prometheus.Desc{
	descConnsRejected, descConnsOpen, descClientSessions, descConnBuffered, descReadPauses, descClientHeld, descClientHeldWaits,
	descSpoolUsed, descSpoolHeld, descSpoolQuota, descSpoolQuotaEvents, descAutoRefused,
	descPrefetched, descPrefetchLimit,
	descDiscoveryNodes, descDiscoveryFull, descDiscoveryDropped, descTransfersEvicted,
}

// collectBounds sends the bounds' figures.
func collectBounds(ch chan<- prometheus.Metric, n *Node) {
	if n.srv != nil {
		cc := n.srv.ConnCounts()
		for reason, v := range cc.Rejected {
			ch <- counter(descConnsRejected, v, reason)
		}
		ic := n.srv.IdentityCounts()
		ch <- counter(descConnsRejected, ic.ConnectionsRefused, "identity")
		ch <- gauge(descClientSessions, int64(ic.Sessions))
		ch <- gauge(descConnsOpen, int64(cc.Handshaking), "handshaking")
		ch <- gauge(descConnsOpen, int64(cc.Open-cc.Handshaking), "authenticated")
		bs := n.srv.BufferStats()
		ch <- gauge(descConnBuffered, bs.Buffered.Load())
		ch <- counter(descReadPauses, int64(bs.Pauses.Load()))
		hs := n.srv.HeldStats()
		ch <- gauge(descClientHeld, hs.Bytes)
		ch <- counter(descClientHeldWaits, hs.Waits)
		ch <- counter(descTransfersEvicted, n.srv.TransfersEvicted())
	}
	if n.spool != nil {
		qs := n.spool.QuotaStats()
		ch <- gauge(descSpoolUsed, qs.Used)
		ch <- gauge(descSpoolHeld, qs.Held)
		ch <- gauge(descSpoolQuota, qs.Max, "total")
		ch <- gauge(descSpoolQuota, qs.PerPeer, "peer")
		ch <- counter(descSpoolQuotaEvents, qs.Paused, "paused")
		ch <- counter(descSpoolQuotaEvents, qs.Refused, "refused")
	}
	ch <- counter(descAutoRefused, n.autoRefused.Load())
	held, limit := n.store.Prefetched()
	ch <- gauge(descPrefetched, held)
	ch <- gauge(descPrefetchLimit, limit)
	if n.dir != nil {
		ch <- gauge(descDiscoveryNodes, int64(n.dir.Discovered()))
		ch <- counter(descDiscoveryFull, int64(n.dir.Full()))
	}
	if d := n.discoveryStats(); d.Enabled {
		for reason, v := range map[string]uint64{"malformed": d.Malformed, "bad_mac": d.BadMAC, "unusable": d.Unusable, "stale": d.Stale} {
			ch <- counter(descDiscoveryDropped, int64(v), reason)
		}
	}
}
