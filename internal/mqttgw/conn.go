package mqttgw

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/message"
)

// connState is one MQTT connection's deliveries: a pump per filter, each
// taking from the filter's Petrel subscription, and the QoS 1 and 2
// deliveries awaiting the client's PUBACK or PUBCOMP, whose Petrel leases
// are acked then. slots bounds those in flight: the client's Receive
// Maximum, or Config.MaxInflight if lower.
type connState struct {
	g    *Gateway
	cl   *mqtt.Client
	conn Conn
	// topic maps the topics of the client's publishes; only the
	// connection's reader, which runs OnPublish, uses it.
	topic topicMemo

	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu      sync.Mutex
	lastID  uint16
	stopped bool
	pumps   map[string]*pump
	// sys holds the client's $SYS filters, which mochi serves itself:
	// they count toward MaxSubscriptions as the pumps do, since each is an
	// entry of mochi's index.
	sys      map[string]bool
	inflight map[uint16]sent
	// resends is whether the session had deliveries noted to resend when
	// this connection began (see resends). Only its last connection's end,
	// or the node's start, notes them, both before this connection
	// began: a connection without any leaves the notes of others alone.
	resends bool
	// acks are the QoS 1 publishes waiting for their commit (ackLater);
	// nil until the first.
	acks chan pendingAck
	// ret is the retained messages mochi dropped on subscribing, which
	// the gateway sends (retainsend.go).
	ret retainedSender
}

type pump struct {
	st     *connState
	filter string
	sub    atomic.Pointer[packets.Subscription]
	ps     Subscription
	cancel context.CancelFunc
	done   chan struct{}
	// name and topic are the Petrel topic of the last copy delivered and
	// its MQTT topic: a subscription's copies mostly come from a few
	// topics, and mapping each again was 3% of a node's CPU in bench mqtt.
	// Only run's goroutine uses them.
	name, topic string
	// shared is a $share filter's: its deliveries are not noted for
	// resending (see resends).
	shared bool
}

// sent is a delivery in flight, with the pump of the filter it went for.
type sent struct {
	d        Delivery
	p        *pump
	mark     string // its key in the store (markSent, markReleased)
	released bool   // its PUBREC came
}

func newConnState(g *Gateway, cl *mqtt.Client, c Conn) *connState {
	n := g.cfg.MaxInflight
	if rm := int(cl.Properties.Props.ReceiveMaximum); cl.Properties.ProtocolVersion == 5 && rm > 0 && rm < n {
		n = rm
	}
	st := &connState{g: g, cl: cl, conn: c, slots: make(chan struct{}, n),
		pumps: map[string]*pump{}, sys: map[string]bool{}, inflight: map[uint16]sent{}}
	st.ctx, st.cancel = context.WithCancel(g.ctx)
	st.resends = g.resends.has(cl.ID)
	st.ret.init(st)
	return st
}

// subscribe starts the delivery of filter, or changes the options of the
// one running (MQTT-3.8.4-3: a repeated filter replaces the subscription
// without interrupting its flow).
func (st *connState) subscribe(sub packets.Subscription, durable, bounded bool) error {
	sys := isSys(sub.Filter)
	var (
		pattern string
		err     error
	)
	if !sys {
		if pattern, err = petrelFilter(sub.Filter); err != nil {
			return err
		}
	}
	st.mu.Lock()
	if p := st.pumps[sub.Filter]; p != nil {
		p.sub.Store(&sub)
		st.mu.Unlock()
		return nil
	}
	if max := st.g.cfg.MaxSubscriptions; bounded && !st.sys[sub.Filter] && len(st.pumps)+len(st.sys) >= max {
		st.mu.Unlock()
		return fmt.Errorf("%w: the client holds %d topic filters (mqtt.max_subscriptions)", errTooManySubscriptions, max)
	}
	if sys {
		st.sys[sub.Filter] = true // mochi delivers its own $SYS topics
		st.mu.Unlock()
		return nil
	}
	stopped := st.stopped
	st.mu.Unlock()
	if stopped {
		return ErrClosed
	}
	var ps Subscription
	_, _, shared, _ := splitShared(sub.Filter)
	if shared {
		ps, err = st.g.joinShare(st.ctx, st.cl.ID, sub.Filter, pattern, st.conn)
	} else {
		name := ""
		if durable {
			name = durableName(st.cl.ID, sub.Filter)
		}
		ps, err = st.g.be.Subscribe(st.ctx, pattern, name, durable, st.conn)
	}
	if err != nil {
		return fmt.Errorf("subscribe to %q: %w", sub.Filter, err)
	}
	pctx, cancel := context.WithCancel(st.ctx)
	p := &pump{st: st, filter: sub.Filter, ps: ps, cancel: cancel, done: make(chan struct{}), shared: shared}
	p.sub.Store(&sub)
	st.mu.Lock()
	if st.stopped || st.pumps[sub.Filter] != nil {
		st.mu.Unlock()
		cancel()
		ps.Close()
		return nil
	}
	st.pumps[sub.Filter] = p
	st.g.wg.Add(1)
	st.mu.Unlock()
	go func() {
		defer st.g.wg.Done()
		p.run(pctx)
	}()
	return nil
}

// errTooManySubscriptions refuses a new topic filter past
// MaxSubscriptions.
var errTooManySubscriptions = errors.New("too many topic filters")

// unsubscribe stops the delivery of filter. What it has in flight stays,
// to be completed (MQTT-3.10.4-3).
func (st *connState) unsubscribe(filter string) {
	st.mu.Lock()
	p := st.pumps[filter]
	delete(st.pumps, filter)
	delete(st.sys, filter)
	st.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// stop ends every pump and gives back, with a nack, what the connection
// had in flight: the subscription delivers it again, to the next
// connection of a persistent session, which resends it under the packet
// identifier noted here (see resends).
func (st *connState) stop() {
	st.mu.Lock()
	st.stopped = true
	pumps := st.pumps
	st.pumps = map[string]*pump{}
	st.mu.Unlock()
	st.cancel()
	for _, p := range pumps {
		p.stop()
	}
	st.mu.Lock()
	inflight := st.inflight
	st.inflight = map[uint16]sent{}
	st.mu.Unlock()
	keep := persistent(st.cl)
	bound := maxResendNotes(st.g.cfg)
	for id, f := range inflight {
		// Noted before the nack, which may deliver it again at once.
		if keep && !f.p.shared {
			pk, _ := st.cl.State.Inflight.Get(id)
			n := resendNote{packetID: id, released: f.released || pk.FixedHeader.Type == packets.Pubrel, mark: f.mark}
			if !st.g.resends.note(st.cl.ID, f.p.key(f.d), n, bound) && f.mark != "" {
				st.g.unmarkLater(st.cl.ID, f.mark)
			}
		}
		_ = f.d.Nack("mqtt: connection closed before the client acknowledged it")
		st.g.inflightDelete(st.cl, id)
	}
}

func (p *pump) stop() {
	p.cancel()
	<-p.done
	p.ps.Close()
}

// complete acks the delivery the client acknowledged.
func (st *connState) complete(id uint16) {
	st.mu.Lock()
	f, ok := st.inflight[id]
	delete(st.inflight, id)
	st.mu.Unlock()
	if !ok {
		// A retained message, which mochi delivered, or the gateway
		// after mochi dropped it.
		st.ret.acked(id)
		return
	}
	_ = f.d.Ack()
	// After the ack: a crash between the two leaves the key, and the
	// PUBREL goes again, which the client answers.
	st.g.unmarkLater(st.cl.ID, f.mark)
	st.g.metrics.acked.Add(1)
	<-st.slots
}

// dropped gives back a delivery mochi dropped (expired in flight).
func (st *connState) dropped(id uint16) {
	st.mu.Lock()
	f, ok := st.inflight[id]
	delete(st.inflight, id)
	st.mu.Unlock()
	if ok {
		_ = f.d.Nack("mqtt: dropped in flight")
		st.g.unmarkLater(st.cl.ID, f.mark)
		<-st.slots
	} else {
		st.ret.acked(id)
	}
}

// packetID picks the identifier of a delivery. mochi keeps one table of
// identifiers in flight for both directions, and refuses a client's
// SUBSCRIBE (0x91) whose identifier a delivery holds; clients count
// theirs up from 1, so deliveries take theirs from the top half down.
// An identifier noted for a delivery to be resent is not taken.
func (st *connState) packetID() (uint16, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for range 1 << 15 {
		st.lastID--
		if st.lastID < 1<<15 {
			st.lastID = 1<<16 - 1
		}
		if st.idFree(st.lastID) && !(st.resends && st.g.resends.reserved(st.cl.ID, st.lastID)) {
			return st.lastID, true
		}
	}
	return 0, false
}

// inflightSet puts pk in cl's table of packets in flight (mochi's), and
// counts it in mochi's figure of them ($SYS/broker/messages/inflight):
// mochi takes one off that figure at each PUBACK, PUBREL or PUBCOMP, so
// one not counted in made it drift below zero. Every entry the gateway
// makes or removes itself goes through here or inflightDelete.
func (g *Gateway) inflightSet(cl *mqtt.Client, pk packets.Packet) {
	if cl.State.Inflight.Set(pk) {
		atomic.AddInt64(&g.srv.Info.Inflight, 1)
	}
}

// inflightDelete is inflightSet's inverse; it reports whether id was
// there.
func (g *Gateway) inflightDelete(cl *mqtt.Client, id uint16) bool {
	if !cl.State.Inflight.Delete(id) {
		return false
	}
	atomic.AddInt64(&g.srv.Info.Inflight, -1)
	return true
}

// idFree reports whether no packet in flight either way holds id. Called
// with mu held.
func (st *connState) idFree(id uint16) bool {
	if _, used := st.cl.State.Inflight.Get(id); used {
		return false
	}
	_, used := st.inflight[id]
	return !used
}

// resent returns the note of d, when d is a delivery the session's last
// connection had in flight and its identifier is free: d goes again
// under it. The note stays, keeping its identifier from other
// deliveries, until deliver has d in flight under it: done forgets it.
func (p *pump) resent(d Delivery) (n resendNote, done func(), ok bool) {
	if p.shared || !p.st.resends {
		return resendNote{}, nil, false
	}
	st := p.st
	k := p.key(d)
	if n, ok = st.g.resends.peek(st.cl.ID, k); !ok {
		return resendNote{}, nil, false
	}
	done = func() { st.g.resends.drop(st.cl.ID, k) }
	st.mu.Lock()
	ok = st.idFree(n.packetID) // else the client took it: a new one
	st.mu.Unlock()
	return n, done, ok
}

// release sends the PUBREL of d, a QoS 2 delivery whose PUBREC the
// session's last connection received (MQTT-4.4.0-1): the client has the
// message, and a PUBLISH again would be a second one. Its PUBCOMP
// completes d as any QoS 2 delivery's does.
func (p *pump) release(d Delivery, id uint16, mark string) bool {
	st := p.st
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: id, Created: time.Now().Unix()}
	st.mu.Lock()
	if st.stopped {
		st.mu.Unlock()
		_ = d.Nack("mqtt: connection closed")
		return false
	}
	st.inflight[id] = sent{d: d, p: p, mark: mark, released: true}
	st.mu.Unlock()
	st.g.inflightSet(st.cl, pk)
	if err := st.cl.WritePacket(pk); err == nil {
		st.g.metrics.released.Add(1)
	}
	return true
}

func (p *pump) run(ctx context.Context) {
	defer close(p.done)
	st := p.st
	cc := corkOf(st.cl.Net.Conn)
	for {
		select {
		case st.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		d, err := p.ps.Receive(ctx)
		if err != nil {
			<-st.slots
			if ctx.Err() == nil {
				st.g.log.Warn("mqtt delivery stopped", "client", st.cl.ID, "filter", p.filter, "error", err)
			}
			return
		}
		if cc == nil {
			if !p.deliver(d) {
				<-st.slots
			}
			continue
		}
		// What else is ready goes out in the same write; a failure of
		// Poll is left for the next Receive to report.
		cc.cork()
	batch:
		for i := 0; ; i++ {
			if !p.deliver(d) {
				<-st.slots
			}
			if i == pumpBatch-1 {
				break
			}
			select {
			case st.slots <- struct{}{}:
			default:
				break batch // the client's window is full
			}
			if d, err = p.ps.Poll(); err != nil {
				<-st.slots
				break
			}
		}
		_ = cc.uncork()
	}
}

// pumpBatch is the most deliveries a pump writes with one write.
const pumpBatch = 64

// topicOf returns the MQTT topic of a copy sent to dest.
func (p *pump) topicOf(dest string) (string, error) {
	name, _, _ := message.ParseDestination(dest)
	if name == p.name && p.topic != "" {
		return p.topic, nil
	}
	topic, err := TopicFromPetrel(name)
	if err != nil {
		return "", err
	}
	p.name, p.topic = name, topic
	return topic, nil
}

// deliver sends d to the client; it reports whether d holds a slot, in
// flight until the client acknowledges it.
func (p *pump) deliver(d Delivery) bool {
	st := p.st
	cl := st.cl
	m := d.Message()
	note, done, resent := p.resent(d)
	if done != nil {
		defer done()
	}
	if !resent && note.mark != "" {
		// The client took the identifier meanwhile: the message goes
		// again under a new one, and its key has no use.
		st.g.unmarkLater(cl.ID, note.mark)
		note.mark = ""
	}
	if resent && note.released {
		return p.release(d, note.packetID, note.mark)
	}
	// The delivery's key in the store, loaded at start or kept below,
	// goes with it into the table of deliveries in flight; on any other
	// way out of here it is removed.
	mark := note.mark
	defer func() { st.g.unmarkLater(cl.ID, mark) }()
	topic, err := p.topicOf(m.Destination)
	if err != nil {
		st.g.metrics.undeliverable.Add(1)
		_ = d.Ack()
		return false
	}
	sub := p.sub.Load()
	if sub.NoLocal { // MQTT-3.8.3-3
		if v, ok := m.Properties.Get(propClient); ok && v.Str() == cl.ID {
			_ = d.Ack()
			return false
		}
	}
	qos := min(msgQoS(m), sub.Qos)
	pk := toPacket(m, topic, qos, time.Now())
	if !sub.RetainAsPublished || cl.Properties.ProtocolVersion < 5 {
		pk.FixedHeader.Retain = false // MQTT-3.3.1-12
	}
	if sub.Identifier > 0 {
		pk.Properties.SubscriptionIdentifier = []int{sub.Identifier}
	}
	if qos == 0 {
		err := cl.WritePacket(pk)
		_ = d.Ack() // QoS 0: at most once, no custody
		if err == nil {
			st.g.metrics.delivered[0].Add(1)
		}
		return false
	}
	id, ok := note.packetID, resent
	if !ok {
		if id, ok = st.packetID(); !ok {
			_ = d.Nack("mqtt: packet identifiers exhausted")
			return false
		}
	}
	pk.PacketID = id
	pk.FixedHeader.Dup = d.Attempt() > 1 || resent
	if qos == 2 && mark == "" && p.keepsFlow() {
		mark = p.markSent(id, d)
	}
	st.mu.Lock()
	if st.stopped {
		st.mu.Unlock()
		_ = d.Nack("mqtt: connection closed")
		return false
	}
	st.inflight[pk.PacketID] = sent{d: d, p: p, mark: mark}
	st.mu.Unlock()
	kept := mark
	mark = "" // the table's now
	st.g.inflightSet(st.cl, pk)
	if err := cl.WritePacket(pk); err != nil {
		if errors.Is(err, packets.ErrPacketTooLarge) {
			// Larger than the client takes (MQTT-3.1.2-25): discarded.
			st.mu.Lock()
			delete(st.inflight, pk.PacketID)
			st.mu.Unlock()
			st.g.inflightDelete(st.cl, pk.PacketID)
			st.g.metrics.undeliverable.Add(1)
			_ = d.Ack()
			st.g.unmarkLater(cl.ID, kept)
			return false
		}
		return true // the connection is going: stop gives it back
	}
	st.g.metrics.delivered[qos].Add(1)
	return true
}
