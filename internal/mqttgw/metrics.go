package mqttgw

import (
	"sort"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts the gateway's traffic for petrel stat and Prometheus.
type metrics struct {
	connections    atomic.Int64 // open now
	connected      atomic.Int64 // accepted since start
	authFailed     atomic.Int64
	refusedOwner   atomic.Int64    // client ids that hold another identity's session
	refusedAliases atomic.Int64    // connections closed for a topic alias past maxTopicAliases
	published      [3]atomic.Int64 // by QoS
	refused        atomic.Int64
	delivered      [3]atomic.Int64 // by QoS
	acked          atomic.Int64
	undeliverable  atomic.Int64 // Petrel topics with no MQTT form
	// refusals by the bound that made them
	refusedClients  atomic.Int64
	refusedRetained atomic.Int64
	refusedSessions atomic.Int64
	refusedSubs     atomic.Int64 // filters refused past MaxSubscriptions
	// wills published (delayed or not), and delayed ones discarded by a
	// new connection to their session
	willsSent      atomic.Int64
	willsCancelled atomic.Int64
	refusedQoS2    atomic.Int64 // past the receive maximum of unreleased QoS 2 publishes
	// refusedRecvMax counts the connections mochi closed with 0x93: a
	// QoS 1 or 2 publish past the Receive Maximum within a connection.
	refusedRecvMax atomic.Int64
	released       atomic.Int64 // PUBRELs resent to a resumed session
	// acceptErrors counts the accept errors retried, by listener
	// (listenerKind).
	acceptErrors [listenerKinds]atomic.Int64
	// retainedWaiting counts the retained messages mochi dropped that
	// wait for their connection's sender (retainsend.go), retainedResent
	// those it wrote; dropped counts the publishes mochi dropped that no
	// one sends, by dropReason.
	retainedWaiting atomic.Int64
	retainedResent  atomic.Int64
	dropped         [dropReasons]atomic.Int64
}

func newMetrics() *metrics { return &metrics{} }

// Stats are the gateway's figures.
type Stats struct {
	Listen        string `json:"listen"`
	WebSocket     string `json:"websocket,omitempty"`
	Clients       int64  `json:"clients"`
	Sessions      int    `json:"sessions"`
	Persistent    int    `json:"persistent_sessions"`
	Subscriptions int    `json:"subscriptions"`
	Connections   int64  `json:"connections_total"`
	AuthFailed    int64  `json:"auth_failed"`
	// RefusedClientIDs counts connections refused because their client
	// id holds a session of another identity.
	RefusedClientIDs int64 `json:"refused_client_ids"`
	// Connecting counts the connections awaiting their CONNECT;
	// RefusedConnecting those closed past the bound on them,
	// RefusedConnectingAddress those past the share of one remote address,
	// RefusedConnectBytes those whose CONNECT passed the bytes all
	// CONNECTs being read may claim, ConnectTimeouts those that did not
	// send their CONNECT in time.
	// A websocket connection awaits its CONNECT from its accept on,
	// before its HTTP upgrade.
	Connecting        int64 `json:"connecting"`
	RefusedConnecting int64 `json:"refused_connecting"`
	// (see Connecting)
	RefusedConnectingAddress int64 `json:"refused_connecting_address"`
	RefusedConnectBytes      int64 `json:"refused_connect_bytes"`
	ConnectTimeouts          int64 `json:"connect_timeouts"`
	// PacketBytes is the bytes that packets of connected clients, of 64
	// KiB or more, claim in their fixed headers and have not yet sent
	// whole; RefusedPacketBytes counts the connections closed because
	// such a packet waited too long for room, PacketTimeouts those whose
	// packet's body stopped coming.
	PacketBytes        int64 `json:"packet_bytes"`
	RefusedPacketBytes int64 `json:"refused_packet_bytes"`
	PacketTimeouts     int64 `json:"packet_timeouts"`
	// RefusedTopicAliases counts the connections closed (0x94) for a
	// topic alias past the 10 a connection may use.
	RefusedTopicAliases int64    `json:"refused_topic_aliases"`
	Published           [3]int64 `json:"published_by_qos"`
	Refused             int64    `json:"publishes_refused"`
	Delivered           [3]int64 `json:"delivered_by_qos"`
	Acked               int64    `json:"deliveries_acked"`
	Inflight            int      `json:"inflight"`
	Undeliverable       int64    `json:"undeliverable"`
	Retained            int64    `json:"retained"`
	// RetainedBytes is the bytes of the retained messages, payloads and
	// topics, as MaxRetainedBytes counts them.
	RetainedBytes int64 `json:"retained_bytes"`
	// RetainedCommits counts the transactions that stored retained
	// messages: several publishes that arrive while one commits share the
	// next.
	RetainedCommits int64 `json:"retained_commits"`
	// RetainedWaiting counts the retained messages sent on subscribing
	// that found the client's queue of writes full (mochi's, 8,192
	// places) and wait for the client to read; RetainedResent those
	// written so. RetainedDropped counts those lost past the 65,536 one
	// connection may hold waiting, SysDropped the $SYS updates mochi
	// dropped for a full queue.
	RetainedWaiting int64 `json:"retained_waiting"`
	RetainedResent  int64 `json:"retained_resent"`
	RetainedDropped int64 `json:"retained_dropped"`
	SysDropped      int64 `json:"sys_dropped"`
	// RefusedClients counts connections refused past MaxClients.
	RefusedClients int64 `json:"refused_clients"`
	// RefusedRetained counts retained publishes refused past MaxRetained
	// or MaxRetainedBytes.
	RefusedRetained int64 `json:"refused_retained"`
	// RefusedSessions counts connections refused past MaxSessions.
	RefusedSessions int64 `json:"refused_sessions"`
	// RefusedSubscriptions counts topic filters refused past
	// MaxSubscriptions.
	RefusedSubscriptions int64 `json:"refused_subscriptions"`
	// WillsDelayed counts the wills waiting for their Will Delay
	// Interval (at most one per persistent session).
	WillsDelayed int `json:"wills_delayed"`
	// WillsSent counts the wills published; WillsDiscarded the delayed
	// ones a new connection to their session discarded.
	WillsSent      int64 `json:"wills_sent"`
	WillsDiscarded int64 `json:"wills_discarded"`
	// QoS2Pending counts the QoS 2 publishes of persistent sessions
	// awaiting their PUBREL, kept in mqtt.db.
	QoS2Pending int `json:"qos2_pending"`
	// RefusedQoS2 counts the clients disconnected (0x93) past the
	// receive maximum of QoS 2 publishes awaiting PUBREL.
	RefusedQoS2 int64 `json:"refused_qos2_pending"`
	// RefusedReceiveMaximum counts the connections closed with 0x93 for a
	// QoS 1 or 2 publish past the Receive Maximum the node announced,
	// within the connection (RefusedQoS2 counts those across restarts).
	RefusedReceiveMaximum int64 `json:"refused_receive_maximum"`
	// ResendNoted counts the deliveries noted, when their connection
	// ended, for their resumed session to get again under their packet
	// identifiers (see resends); ResentReleases the PUBRELs resent so.
	ResendNoted    int   `json:"resend_noted"`
	ResentReleases int64 `json:"resent_releases"`
	// SharedGroups counts the shared subscriptions ($share/<group>/
	// <filter>) with members.
	SharedGroups int `json:"shared_groups"`
	// AcceptErrors counts the errors of the TCP listener's Accept
	// retried (EMFILE: out of file descriptors, and the like);
	// WebSocketAcceptErrors those of the WebSocket listener.
	AcceptErrors          int64 `json:"accept_errors"`
	WebSocketAcceptErrors int64 `json:"websocket_accept_errors,omitempty"`
	// ListenerError says why a listener stopped accepting connections
	// other than by the node's stop: it serves no more until the node
	// restarts, and /readyz answers 503. Empty while they serve.
	ListenerError string `json:"listener_error,omitempty"`
	// List is the sessions, connected or not, sorted by client id, at
	// most maxListed of them.
	List []SessionInfo `json:"list,omitempty"`
}

// SessionInfo is one MQTT session.
type SessionInfo struct {
	ClientID      string   `json:"client_id"`
	Username      string   `json:"username,omitempty"`
	Connected     bool     `json:"connected"`
	Persistent    bool     `json:"persistent"`
	Version       byte     `json:"protocol_version"`
	Subscriptions []string `json:"subscriptions,omitempty"`
	Inflight      int      `json:"inflight"`
}

// maxListed bounds the sessions Stats lists.
const maxListed = 1000

// Stats returns the gateway's figures.
func (g *Gateway) Stats() Stats {
	m := g.metrics
	s := Stats{
		Listen: g.Addr(), WebSocket: g.WebSocketAddr(),
		Clients: m.connections.Load(), Connections: m.connected.Load(), AuthFailed: m.authFailed.Load(),
		RefusedClientIDs:    m.refusedOwner.Load(),
		RefusedTopicAliases: m.refusedAliases.Load(),
		PacketBytes:         g.claims.used.Load(), RefusedPacketBytes: g.claims.refused.Load(), PacketTimeouts: g.claims.stalled.Load(),
		Connecting: g.connecting.conns.Load(), RefusedConnecting: g.connecting.refusedConns.Load(),
		RefusedConnectingAddress: g.connecting.refusedAddress.Load(),
		RefusedConnectBytes:      g.connecting.refusedBytes.Load(), ConnectTimeouts: g.connecting.timedOut.Load(),
		Refused: m.refused.Load(), Acked: m.acked.Load(), Undeliverable: m.undeliverable.Load(),
		RefusedClients: m.refusedClients.Load(), RefusedRetained: m.refusedRetained.Load(),
		RefusedSessions: m.refusedSessions.Load(), RefusedSubscriptions: m.refusedSubs.Load(),
		WillsSent: m.willsSent.Load(), WillsDiscarded: m.willsCancelled.Load(),
		RefusedQoS2: m.refusedQoS2.Load(), RefusedReceiveMaximum: m.refusedRecvMax.Load(), ResentReleases: m.released.Load(),
		RetainedWaiting: m.retainedWaiting.Load(), RetainedResent: m.retainedResent.Load(),
		RetainedDropped: m.dropped[dropRetainedWaiting].Load() + m.dropped[dropNoSubscription].Load(),
		SysDropped:      m.dropped[dropSys].Load(),
		ResendNoted:     int(g.resends.total.Load()),
		AcceptErrors:    m.acceptErrors[listenerTCP].Load(), WebSocketAcceptErrors: m.acceptErrors[listenerWebSocket].Load(),
	}
	if err := g.Err(); err != nil {
		s.ListenerError = err.Error()
	}
	g.qos2.mu.Lock()
	s.QoS2Pending = g.qos2.total
	g.qos2.mu.Unlock()
	s.SharedGroups = g.sharedGroups()
	g.wills.mu.Lock()
	s.WillsDelayed = len(g.wills.pending)
	g.wills.mu.Unlock()
	s.Retained = int64(g.retainedCount())
	s.RetainedBytes = g.RetainedBytes()
	s.RetainedCommits = g.retainer.commits.Load()
	for i := range 3 {
		s.Published[i] = m.published[i].Load()
		s.Delivered[i] = m.delivered[i].Load()
	}
	for _, cl := range g.srv.Clients.GetAll() {
		s.Sessions++
		if persistent(cl) {
			s.Persistent++
		}
		subs := cl.State.Subscriptions.GetAll()
		s.Subscriptions += len(subs)
		s.Inflight += cl.State.Inflight.Len()
		if len(s.List) < maxListed {
			si := SessionInfo{ClientID: cl.ID, Username: string(cl.Properties.Username), Connected: !cl.Closed(),
				Persistent: persistent(cl), Version: cl.Properties.ProtocolVersion, Inflight: cl.State.Inflight.Len()}
			for f := range subs {
				si.Subscriptions = append(si.Subscriptions, f)
			}
			sort.Strings(si.Subscriptions)
			s.List = append(s.List, si)
		}
	}
	sort.Slice(s.List, func(i, j int) bool { return s.List[i].ClientID < s.List[j].ClientID })
	return s
}

var (
	descConns       = prometheus.NewDesc("petrel_mqtt_connections", "MQTT connections open.", nil, nil)
	descConnTotal   = prometheus.NewDesc("petrel_mqtt_connections_total", "MQTT connections accepted.", nil, nil)
	descAuth        = prometheus.NewDesc("petrel_mqtt_auth_failures_total", "MQTT connections refused by authentication.", nil, nil)
	descConnecting  = prometheus.NewDesc("petrel_mqtt_connecting", "MQTT connections awaiting their CONNECT (over WebSocket, from their accept on, before their HTTP upgrade).", nil, nil)
	descPacketBytes = prometheus.NewDesc("petrel_mqtt_packet_bytes", "Bytes that MQTT packets of 64 KiB or more, after the CONNECT, claim in their fixed headers and have not yet sent whole.", nil, nil)
	descConnTimeout = prometheus.NewDesc("petrel_mqtt_connect_timeouts_total", "MQTT connections closed because they did not send their CONNECT in time.", nil, nil)
	descOwner       = prometheus.NewDesc("petrel_mqtt_client_id_refused_total", "MQTT connections refused because their client identifier holds a session of another identity.", nil, nil)
	descSessions    = prometheus.NewDesc("petrel_mqtt_sessions", "MQTT sessions known, connected or not, by persistence.", []string{"persistent"}, nil)
	descPub         = prometheus.NewDesc("petrel_mqtt_published_total", "MQTT publishes accepted, by QoS.", []string{"qos"}, nil)
	descRefused     = prometheus.NewDesc("petrel_mqtt_publishes_refused_total", "MQTT publishes refused with a reason code.", nil, nil)
	descDeliv       = prometheus.NewDesc("petrel_mqtt_delivered_total", "Messages delivered to MQTT clients, by QoS, redeliveries included.", []string{"qos"}, nil)
	descAcked       = prometheus.NewDesc("petrel_mqtt_deliveries_acked_total", "QoS 1 and 2 deliveries acknowledged by MQTT clients.", nil, nil)
	descInflight    = prometheus.NewDesc("petrel_mqtt_inflight", "QoS 1 and 2 messages in flight to or from MQTT clients.", nil, nil)
	descRetained    = prometheus.NewDesc("petrel_mqtt_retained", "Retained messages.", nil, nil)
	descRetainedTx  = prometheus.NewDesc("petrel_mqtt_retained_commits_total", "Transactions that stored retained messages; the publishes that arrive while one commits share the next.", nil, nil)
	descRetainedW   = prometheus.NewDesc("petrel_mqtt_retained_waiting", "Retained messages sent on subscribing that found the client's queue of writes full and wait for the client to read.", nil, nil)
	descRetainedRe  = prometheus.NewDesc("petrel_mqtt_retained_resent_total", "Retained messages sent on subscribing that found the client's queue of writes full, written once the client read.", nil, nil)
	descDropped     = prometheus.NewDesc("petrel_mqtt_dropped_total", "Publishes to MQTT clients whose queue of writes was full, not sent, by reason: retained (a retained message sent on subscribing, past the 65,536 a connection may hold waiting), sys (a $SYS update; the next comes with the next interval).", []string{"reason"}, nil)
	descRetainedB   = prometheus.NewDesc("petrel_mqtt_retained_bytes", "Bytes of the retained messages, payloads and topics, as mqtt.max_retained_bytes counts them.", nil, nil)
	descQoS2        = prometheus.NewDesc("petrel_mqtt_qos2_pending", "QoS 2 publishes of persistent MQTT sessions awaiting their PUBREL, kept across restarts.", nil, nil)
	descResend      = prometheus.NewDesc("petrel_mqtt_resend_noted", "Deliveries of persistent MQTT sessions in flight when their connection ended, noted to be sent again under their packet identifiers.", nil, nil)
	descReleases    = prometheus.NewDesc("petrel_mqtt_resent_releases_total", "PUBRELs of QoS 2 deliveries sent again to a resumed MQTT session.", nil, nil)
	descAcceptErr   = prometheus.NewDesc("petrel_mqtt_accept_errors_total", "Errors accepting MQTT connections, retried after a wait (EMFILE: out of file descriptors, and the like), by listener: tcp, websocket.", []string{"listener"}, nil)
	descShared      = prometheus.NewDesc("petrel_mqtt_shared_groups", "MQTT shared subscriptions ($share/<group>/<filter>) with members.", nil, nil)
	descWillsWait   = prometheus.NewDesc("petrel_mqtt_wills_delayed", "MQTT wills waiting for their Will Delay Interval.", nil, nil)
	descWills       = prometheus.NewDesc("petrel_mqtt_wills_total", "MQTT wills published (sent), or discarded by a new connection to their session within their delay.", []string{"outcome"}, nil)
	descBound       = prometheus.NewDesc("petrel_mqtt_refused_total", "MQTT connections, retained publishes, topic filters and QoS 2 publishes refused past a bound, by bound: clients, retained, sessions, subscriptions, qos2_pending (QoS 2 publishes awaiting PUBREL, across a restart), receive_maximum (connections closed for a QoS 1 or 2 publish past the Receive Maximum), connecting (connections awaiting their CONNECT), connect_bytes (the bytes their CONNECTs claim), packet_bytes (connections whose packet waited too long for room in the bytes the packets being read may claim), packet_timeout (connections whose large packet stopped coming), topic_aliases (connections closed for an alias past the 10 allowed).", []string{"reason"}, nil)
)

// Collector returns the gateway's Prometheus collector.
func (g *Gateway) Collector() prometheus.Collector { return collector{g} }

type collector struct{ g *Gateway }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descConnTotal, descAuth, descOwner, descConnecting, descPacketBytes, descConnTimeout, descSessions, descPub, descRefused, descDeliv, descAcked, descInflight, descRetained, descRetainedB, descRetainedTx, descRetainedW, descRetainedRe, descDropped, descBound, descWillsWait, descWills, descQoS2, descShared, descResend, descReleases, descAcceptErr} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Stats()
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.Clients))
	ch <- prometheus.MustNewConstMetric(descConnTotal, prometheus.CounterValue, float64(s.Connections))
	ch <- prometheus.MustNewConstMetric(descAuth, prometheus.CounterValue, float64(s.AuthFailed))
	ch <- prometheus.MustNewConstMetric(descOwner, prometheus.CounterValue, float64(s.RefusedClientIDs))
	ch <- prometheus.MustNewConstMetric(descConnecting, prometheus.GaugeValue, float64(s.Connecting))
	ch <- prometheus.MustNewConstMetric(descConnTimeout, prometheus.CounterValue, float64(s.ConnectTimeouts))
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedConnecting), "connecting")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedConnectingAddress), "connecting_address")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedConnectBytes), "connect_bytes")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedTopicAliases), "topic_aliases")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedPacketBytes), "packet_bytes")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.PacketTimeouts), "packet_timeout")
	ch <- prometheus.MustNewConstMetric(descPacketBytes, prometheus.GaugeValue, float64(s.PacketBytes))
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(s.Persistent), "true")
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(s.Sessions-s.Persistent), "false")
	for q := range 3 {
		ch <- prometheus.MustNewConstMetric(descPub, prometheus.CounterValue, float64(s.Published[q]), qosLabel[q])
		ch <- prometheus.MustNewConstMetric(descDeliv, prometheus.CounterValue, float64(s.Delivered[q]), qosLabel[q])
	}
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(descAcked, prometheus.CounterValue, float64(s.Acked))
	ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(s.Inflight))
	ch <- prometheus.MustNewConstMetric(descRetained, prometheus.GaugeValue, float64(s.Retained))
	ch <- prometheus.MustNewConstMetric(descRetainedB, prometheus.GaugeValue, float64(s.RetainedBytes))
	ch <- prometheus.MustNewConstMetric(descRetainedTx, prometheus.CounterValue, float64(s.RetainedCommits))
	ch <- prometheus.MustNewConstMetric(descRetainedW, prometheus.GaugeValue, float64(s.RetainedWaiting))
	ch <- prometheus.MustNewConstMetric(descRetainedRe, prometheus.CounterValue, float64(s.RetainedResent))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.RetainedDropped), "retained")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.SysDropped), "sys")
	ch <- prometheus.MustNewConstMetric(descWillsWait, prometheus.GaugeValue, float64(s.WillsDelayed))
	ch <- prometheus.MustNewConstMetric(descWills, prometheus.CounterValue, float64(s.WillsSent), "sent")
	ch <- prometheus.MustNewConstMetric(descWills, prometheus.CounterValue, float64(s.WillsDiscarded), "discarded")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedClients), "clients")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedRetained), "retained")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedSessions), "sessions")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedSubscriptions), "subscriptions")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedQoS2), "qos2_pending")
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.CounterValue, float64(s.RefusedReceiveMaximum), "receive_maximum")
	ch <- prometheus.MustNewConstMetric(descQoS2, prometheus.GaugeValue, float64(s.QoS2Pending))
	ch <- prometheus.MustNewConstMetric(descShared, prometheus.GaugeValue, float64(s.SharedGroups))
	ch <- prometheus.MustNewConstMetric(descResend, prometheus.GaugeValue, float64(s.ResendNoted))
	ch <- prometheus.MustNewConstMetric(descReleases, prometheus.CounterValue, float64(s.ResentReleases))
	ch <- prometheus.MustNewConstMetric(descAcceptErr, prometheus.CounterValue, float64(s.AcceptErrors), listenerTCP.String())
	if c.g.ws != nil {
		ch <- prometheus.MustNewConstMetric(descAcceptErr, prometheus.CounterValue, float64(s.WebSocketAcceptErrors), listenerWebSocket.String())
	}
}

var qosLabel = [3]string{"0", "1", "2"}
