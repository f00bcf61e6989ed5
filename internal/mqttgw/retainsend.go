package mqttgw

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// mochi sends a new subscription's retained messages itself
// (publishRetainedToClient), each through the client's queue of writes
// (Capabilities.MaximumClientWritesPending places) with a send that does
// not wait: once the queue is full, because the client reads slower than
// mochi walks its index, the rest is dropped, QoS 1 and 2 included, and
// only OnPublishDropped hears of it. A subscriber that did not read for
// half a second while 9,990 retained messages of 2 KB matched got 9,590.
//
// The gateway takes those over. mochi hands over the message as its
// index holds it, not the packet it made for the client, so the
// SUBSCRIBE being processed is kept from OnSubscribe to
// OnPacketProcessed, to find the subscription a dropped message was for.
// The connection keeps the topic and what the subscription grants, in
// the order dropped, up to maxRetainedWaiting of them, and one
// goroutine, started with the first, makes each packet as mochi makes it
// (publishToClient) from the topic's retained message in mochi's index
// then, and writes it to the client with a blocking WritePacket, as the
// pumps write their deliveries; it ends once none waits. A topic whose
// retained message was replaced meanwhile sends the new one, one whose
// message was deleted or expired none: the client gets the topic's
// retained message as it is when sent, not one older than what its
// subscription may have delivered already.
//
// mochi takes a QoS 1 or 2 message's packet identifier under the lock
// its writer holds while the client's socket is full, so those mostly
// wait there rather than being dropped; QoS 0 ones never wait.

// maxRetainedWaiting bounds the retained messages mochi dropped that one
// connection holds to send: each holds its topic (the string of mochi's
// index) and its subscription's grant, about 64 bytes, so 4 MiB. With
// the default max_retained of 10,000, only a SUBSCRIBE of seven filters
// that each match them all reaches it. Past it a dropped message is
// lost, counted and logged.
const maxRetainedWaiting = 65536

// maxRetainedWaitingNode bounds the same across every connection of the
// node, 64 MiB of them: the bound per connection alone let 1,024 clients
// that subscribe and stop reading hold 4 GiB. Past it a dropped message
// is lost as past the other. retainedWaitingNodeBound, when set, is a
// test's.
const maxRetainedWaitingNode = 1 << 20

var retainedWaitingNodeBound atomic.Int64

func nodeRetainedWaitingBound() int64 {
	if n := retainedWaitingNodeBound.Load(); n > 0 {
		return n
	}
	return maxRetainedWaitingNode
}

// clientWritesPending, when set, is the places of each client's queue of
// writes in gateways made from then on, for a test; mochi's default,
// 8,192, when zero.
var clientWritesPending atomic.Int32

// retainedSender is one connection's retained messages mochi dropped.
type retainedSender struct {
	st *connState
	// room is signalled when a packet in flight to the client completes,
	// which may let a QoS 1 or 2 message waiting for room go.
	room chan struct{}

	mu sync.Mutex
	// run is the SUBSCRIBE whose retained messages mochi is sending, nil
	// between them.
	run     *retainedRun
	q       []retainedWait
	running bool // a goroutine writes q
	// inflight holds the packet identifiers of the QoS 1 and 2 messages
	// written and not yet acknowledged: at most cap(st.slots) of them, the
	// client's Receive Maximum or MaxInflight, as for the pumps.
	inflight map[uint16]struct{}
}

// retainedRun is the SUBSCRIBE whose retained messages mochi is sending.
type retainedRun struct {
	// subs are its filters that get retained messages, in the order
	// mochi walks them: not shared ones (MQTT 4.8.2), not Retain
	// Handling 2, nor 1 for a filter the client held already.
	subs []packets.Subscription
	// seen counts the messages of each topic mochi sent or dropped in
	// this run, when two filters of it may match one topic: mochi sends
	// a topic's message once per matching filter, filter after filter,
	// so the nth of a topic is for its nth matching filter. nil with a
	// single filter.
	seen map[string]int
}

// retainedWait is a dropped retained message: its topic, and what its
// subscription makes of it.
type retainedWait struct {
	topic   string
	qos     byte // granted: the subscription's, at most MaximumQos
	noLocal bool
	ids     []int // subscription identifiers (mochi's Identifiers)
}

func (r *retainedSender) init(st *connState) {
	r.st = st
	r.room = make(chan struct{}, 1)
	r.inflight = map[uint16]struct{}{}
}

// OnSubscribe notes the SUBSCRIBE whose retained messages mochi sends
// next; it changes nothing of it.
func (h *hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if st := h.conn(cl); st != nil {
		st.ret.begin(pk.Filters)
	}
	return pk
}

// OnPacketProcessed ends the run of a SUBSCRIBE's retained messages.
func (h *hook) OnPacketProcessed(cl *mqtt.Client, pk packets.Packet, _ error) {
	if pk.FixedHeader.Type != packets.Subscribe {
		return
	}
	if st := h.conn(cl); st != nil {
		st.ret.end()
	}
}

// OnRetainPublished counts a retained message mochi queued, when the
// SUBSCRIBE's filters may overlap (see retainedRun.seen).
func (h *hook) OnRetainPublished(cl *mqtt.Client, pk packets.Packet) {
	if st := h.conn(cl); st != nil {
		st.ret.mu.Lock()
		if run := st.ret.run; run != nil && run.seen != nil {
			run.seen[pk.TopicName]++
		}
		st.ret.mu.Unlock()
	}
}

// OnPublishDropped takes over a retained message mochi had no room for in
// the client's queue of writes. Others, mochi's $SYS updates to a client
// whose queue is full, are counted and logged: the next comes with the
// next $SYS interval.
func (h *hook) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	st := h.conn(cl)
	why := dropNoSubscription
	if st != nil {
		why = st.ret.take(pk)
		if why == dropNone {
			return
		}
	}
	h.g.writeDropped(cl, pk, why)
}

func (r *retainedSender) begin(filters []packets.Subscription) {
	run := &retainedRun{}
	for _, sub := range filters {
		if mqtt.IsSharedFilter(sub.Filter) || sub.RetainHandling == 2 {
			continue
		}
		if _, existed := r.st.cl.State.Subscriptions.Get(sub.Filter); existed && sub.RetainHandling == 1 {
			continue
		}
		run.subs = append(run.subs, sub)
	}
	if len(run.subs) > 1 {
		run.seen = map[string]int{}
	}
	r.mu.Lock()
	r.run = run
	r.mu.Unlock()
}

func (r *retainedSender) end() {
	r.mu.Lock()
	r.run = nil
	r.mu.Unlock()
}

// take keeps pk, dropped by mochi, to be written by the sender; it
// returns why not, if it does not.
func (r *retainedSender) take(pk packets.Packet) dropReason {
	st := r.st
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.run
	if run == nil {
		return dropSys // not on subscribing: a $SYS update
	}
	sub, ok := run.subFor(st.cl, pk.TopicName)
	if !ok {
		return dropNoSubscription
	}
	if len(r.q) >= maxRetainedWaiting || st.g.metrics.retainedWaiting.Load() >= nodeRetainedWaitingBound() {
		return dropRetainedWaiting
	}
	w := retainedWait{topic: pk.TopicName, qos: min(sub.Qos, st.g.srv.Options.Capabilities.MaximumQos), noLocal: sub.NoLocal}
	for _, id := range sub.Identifiers {
		w.ids = append(w.ids, id)
	}
	slices.Sort(w.ids)
	if !r.running {
		st.mu.Lock()
		stopped := st.stopped
		if !stopped {
			st.g.wg.Add(1)
		}
		st.mu.Unlock()
		if stopped {
			return dropNone // the connection is gone: nothing is owed to it
		}
		r.running = true
		go r.send()
	}
	r.q = append(r.q, w)
	st.g.metrics.retainedWaiting.Add(1)
	if held, ok := st.g.refusedLog.Allow(st.cl.ID + "\x00retained_wait"); ok {
		st.g.log.Info("mqtt client reads slower than its retained messages come; those past its queue of writes wait for it",
			slog.String("client", st.cl.ID), slog.Int("queue", int(st.g.srv.Options.Capabilities.MaximumClientWritesPending)),
			slog.Int64("suppressed", held))
	}
	return dropNone
}

// subFor returns the subscription of the run that mochi sent topic's
// message for (see seen).
func (run *retainedRun) subFor(cl *mqtt.Client, topic string) (packets.Subscription, bool) {
	nth := 0
	if run.seen != nil {
		nth = run.seen[topic]
		run.seen[topic]++
	}
	var last packets.Subscription
	found := false
	for _, sub := range run.subs {
		if !filterMatches(sub.Filter, topic) {
			continue
		}
		// A filter the node refused after mochi took it (OnSubscribed)
		// got no retained message.
		if _, ok := cl.State.Subscriptions.Get(sub.Filter); !ok {
			continue
		}
		if nth == 0 {
			return sub, true
		}
		nth--
		last, found = sub, true
	}
	return last, found
}

// filterMatches reports whether an MQTT topic filter matches topic; a
// topic that starts with '$' matches no filter that starts with a
// wildcard (MQTT-4.7.2-1).
func filterMatches(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		f, frest, fmore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		t, trest, tmore := strings.Cut(topic, "/")
		if f != "+" && f != t {
			return false
		}
		if !fmore || !tmore {
			// "a/#" matches "a" too (MQTT 4.7.1.2).
			return fmore == tmore || (!tmore && frest == "#")
		}
		filter, topic = frest, trest
	}
}

// send writes what waits, in the order it came, until none does or the
// connection ends.
func (r *retainedSender) send() {
	st := r.st
	defer st.g.wg.Done()
	for {
		r.mu.Lock()
		if len(r.q) == 0 || st.ctx.Err() != nil {
			// What still waits was owed to this connection only: a
			// resumed session is not sent retained messages again.
			st.g.metrics.retainedWaiting.Add(-int64(len(r.q)))
			r.q, r.running = nil, false
			r.mu.Unlock()
			return
		}
		w := r.q[0]
		r.q[0] = retainedWait{}
		r.q = r.q[1:]
		r.mu.Unlock()
		st.g.metrics.retainedWaiting.Add(-1)
		r.write(w)
	}
}

// write makes w's packet as mochi's publishToClient makes a retained
// message's, and writes it.
func (r *retainedSender) write(w retainedWait) {
	st := r.st
	cl := st.cl
	pk, ok := st.g.srv.Topics.Retained.Get(w.topic)
	if !ok || len(pk.Payload) == 0 {
		return // deleted while it waited
	}
	if expiry := pk.Expiry; expiry > 0 && time.Now().Unix() >= expiry {
		return // expired while it waited (MQTT-3.3.2-5)
	}
	if w.noLocal && pk.Origin == cl.ID {
		return // replaced by the client's own (MQTT-3.8.3-3)
	}
	out := pk.Copy(false)
	// A retained message sent on subscribing keeps its retain flag
	// (mochi's FwdRetainedFlag, MQTT-3.3.1-9).
	out.FixedHeader.Qos = min(out.FixedHeader.Qos, w.qos)
	if len(w.ids) > 0 {
		out.Properties.SubscriptionIdentifier = w.ids
	}
	if cl.Properties.Props.TopicAliasMaximum > 0 {
		if alias, _ := cl.State.TopicAliases.Outbound.Set(out.TopicName); alias > 0 {
			// With its topic all the same: the packet that gave the
			// alias its topic may be the one mochi dropped.
			out.Properties.TopicAlias, out.Properties.TopicAliasFlag = alias, true
		}
	}
	if out.FixedHeader.Qos > 0 {
		id, ok := r.packetID()
		if !ok {
			return // the connection ended
		}
		out.PacketID = id
		// In mochi's table, as its own retained deliveries: the client's
		// PUBACK (or PUBREC, PUBCOMP) completes it there, and OnQosComplete
		// frees its place here (acked).
		st.g.inflightSet(cl, out)
		cl.State.Inflight.DecreaseSendQuota()
	}
	err := cl.WritePacket(out)
	switch {
	case err == nil:
		st.g.metrics.retainedResent.Add(1)
	case errors.Is(err, packets.ErrPacketTooLarge):
		// Larger than the client takes (MQTT-3.1.2-25): mochi would have
		// discarded it too.
		if out.FixedHeader.Qos > 0 && st.g.inflightDelete(cl, out.PacketID) {
			cl.State.Inflight.IncreaseSendQuota()
			r.acked(out.PacketID)
		}
		st.g.metrics.undeliverable.Add(1)
	}
	// Any other error: the connection is going, and send stops.
}

// packetID waits for room in the client's window and returns the packet
// identifier of a QoS 1 or 2 message, held in inflight until acked; false
// once the connection ends. Room is a place under cap(st.slots) among
// these messages, and mochi's table of packets in flight under its
// MaximumInflight, past which mochi drops a QoS 1 or 2 message.
func (r *retainedSender) packetID() (uint16, bool) {
	st := r.st
	maxTable := int(st.g.srv.Options.Capabilities.MaximumInflight)
	var timer *time.Timer
	for {
		r.mu.Lock()
		if len(r.inflight) < cap(st.slots) && st.cl.State.Inflight.Len() < maxTable {
			// The pumps' identifiers: from the top half down, none that a
			// delivery to be resent holds.
			if id, ok := st.packetID(); ok {
				r.inflight[id] = struct{}{}
				r.mu.Unlock()
				if timer != nil {
					timer.Stop()
				}
				return id, true
			}
		}
		r.mu.Unlock()
		// mochi's table also empties by ways that do not pass acked (an
		// expiry): it is looked at again now and then.
		if timer == nil {
			timer = time.NewTimer(retainedRoomRecheck)
		} else {
			timer.Reset(retainedRoomRecheck)
		}
		select {
		case <-r.room:
		case <-timer.C:
		case <-st.ctx.Done():
			timer.Stop()
			return 0, false
		}
	}
}

// retainedRoomRecheck is how often a message waiting for room in the
// client's window looks again without being told.
const retainedRoomRecheck = time.Second

// acked frees the place of a packet in flight to the client, which
// completed: one of the sender's, or any other, which makes room in
// mochi's table.
func (r *retainedSender) acked(id uint16) {
	r.mu.Lock()
	delete(r.inflight, id)
	r.mu.Unlock()
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// dropReason is why a publish mochi dropped is not sent by the gateway.
type dropReason int

const (
	dropNone dropReason = iota // it is sent
	// dropRetainedWaiting: past maxRetainedWaiting.
	dropRetainedWaiting
	// dropSys: not a retained message sent on subscribing, but one of
	// mochi's $SYS updates; the next comes with the next interval.
	dropSys
	// dropNoSubscription: no filter of the SUBSCRIBE matches it, or the
	// connection is not the gateway's (yet).
	dropNoSubscription
	dropReasons
)

func (r dropReason) String() string {
	return [...]string{"", "retained_waiting", "sys", "no_subscription"}[r]
}

// writeDropped counts and logs a publish mochi dropped that the gateway
// does not send.
func (g *Gateway) writeDropped(cl *mqtt.Client, pk packets.Packet, why dropReason) {
	g.metrics.dropped[why].Add(1)
	if held, ok := g.refusedLog.Allow(cl.ID + "\x00dropped\x00" + why.String()); ok {
		g.log.Warn("mqtt publish to a client dropped: its queue of writes is full",
			slog.String("client", cl.ID), slog.String("topic", pk.TopicName), slog.String("reason", why.String()),
			slog.Int64("suppressed", held))
	}
}
