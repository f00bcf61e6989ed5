package mqttgw

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/message"
)

// OnPublish hands a client's publish to the node. A QoS 1 or 2 publish is
// submitted, and its PUBACK or PUBREC sent by the connection's acker once
// the node committed it (ackLater): never for what a crash could lose,
// and without holding up the connection's next publishes, which share the
// commit. A retained publish of QoS 1 is acked the same way, once the
// retainer kept it too; one of QoS 2 is awaited here, before mochi's
// PUBREC. QoS 0 is submitted, not awaited, and a retained one handed to
// the retainer.
//
// mochi is told to ignore the message (CodeSuccessIgnore): it acks but
// does not route it; every delivery comes from a Petrel subscription.
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if strings.HasPrefix(pk.TopicName, "$") {
		// After mochi resolved a topic alias, so that an alias of a
		// '$' topic is refused too.
		h.refuseDollar(cl, pk)
		return pk, packets.ErrRejectPacket
	}
	st := h.conn(cl)
	if st == nil {
		return pk, packets.ErrRejectPacket
	}
	qos := pk.FixedHeader.Qos
	if qos == 2 && persistent(cl) && !h.qos2Admit(cl) {
		return pk, packets.ErrRejectPacket
	}
	// The marker commits with the message, before the PUBREC.
	mark := qos2Mark(cl, pk)
	if qos == 1 && pk.FixedHeader.Retain {
		// Acked as below, once the node committed it and the retainer
		// kept it.
		c, err := h.g.publishRetained(st.conn, pk, &st.topic, mark)
		if err != nil {
			h.g.metrics.refused.Add(1)
			h.refuse(cl, refOf(pk), err)
			return pk, packets.ErrRejectPacket
		}
		st.ackLater(h, refOf(pk), c)
		return pk, packets.ErrRejectPacket
	}
	if qos > 0 && !pk.FixedHeader.Retain {
		// The PUBACK or PUBREC is ours, sent once the commit is done,
		// by the connection's acker, so that this connection's next
		// publishes are read meanwhile and share the commit.
		c, err := h.g.submit(st.conn, pk, &st.topic, mark)
		if err != nil {
			h.g.metrics.refused.Add(1)
			h.refuse(cl, refOf(pk), err)
			return pk, packets.ErrRejectPacket
		}
		if qos == 2 {
			h.awaitPubrec(cl, pk.PacketID, mark, c)
		}
		st.ackLater(h, refOf(pk), c)
		return pk, packets.ErrRejectPacket
	}
	if err := h.g.publish(st.conn, pk, &st.topic, mark); err != nil {
		h.g.metrics.refused.Add(1)
		h.refuse(cl, refOf(pk), err)
		return pk, packets.ErrRejectPacket
	}
	if mark != "" {
		h.g.qos2.add(cl.ID, pk.PacketID)
	}
	h.g.metrics.published[qos].Add(1)
	return pk, packets.CodeSuccessIgnore
}

// publish stores pk in the node, with mark (see Backend.Publish), then,
// for a retained publish, as its topic's retained message. memo, if not
// nil, maps the topic. A publish of QoS 1 or 2 returns once it is
// committed, and retained; one of QoS 0 once it is submitted.
func (g *Gateway) publish(c Conn, pk packets.Packet, memo *topicMemo, mark string) error {
	var commit Commit
	var err error
	if pk.FixedHeader.Retain {
		commit, err = g.publishRetained(c, pk, memo, mark)
	} else {
		commit, err = g.submit(c, pk, memo, mark)
	}
	if err != nil || pk.FixedHeader.Qos == 0 {
		return err
	}
	return waitCommit(g.ctx, commit)
}

// publishRetained submits pk, a retained publish, to the node, and hands
// it to the retainer, which keeps it as its topic's retained message once
// the node committed it. The Commit it returns is done once both are.
func (g *Gateway) publishRetained(c Conn, pk packets.Packet, memo *topicMemo, mark string) (Commit, error) {
	release, err := g.reserveRetained(pk)
	if err != nil {
		g.metrics.refusedRetained.Add(1)
		return nil, &Refusal{Code: CodeQuotaExceeded, Reason: err.Error()}
	}
	commit, err := g.submit(c, pk, memo, mark)
	if err != nil {
		release()
		return nil, err
	}
	j, err := g.retainer.add(pk, commit, release)
	if err != nil {
		release()
		return nil, err
	}
	return j, nil
}

// submit maps pk to a Petrel message and submits it to the node, with
// mark.
func (g *Gateway) submit(c Conn, pk packets.Packet, memo *topicMemo, mark string) (Commit, error) {
	topic, err := memo.toPetrel(pk.TopicName)
	if err != nil {
		return nil, &Refusal{Code: CodeTopicNameBad, Reason: err.Error()}
	}
	m := g.be.NewMessage(topic)
	if err := toMessage(m, pk, c.ClientID, g.cfg.Limits); err != nil {
		return nil, err
	}
	return g.be.Publish(g.ctx, m, c, mark)
}

// reserveRetained checks, before anything of pk is stored, that its
// retained message fits under MaxRetained and MaxRetainedBytes, and
// returns the refusal's reason if not. Deleting a topic's retained
// message always fits, and replacing one fits the count. A new topic
// takes a slot, and a message larger than the one it replaces the bytes
// it adds, both held until retain put it in mochi's index (release), so
// that concurrent publishes cannot overshoot the bounds together. The
// count is mochi's figure, which retainedChanged keeps (without its $SYS
// figures): a topic put in the index and not yet released counts twice
// for that moment, as do its bytes, which errs on the side of the bounds.
func (g *Gateway) reserveRetained(pk packets.Packet) (release func(), err error) {
	nothing := func() {}
	if len(pk.Payload) == 0 {
		return nothing, nil
	}
	topic := pk.TopicName
	g.retainMu.Lock()
	defer g.retainMu.Unlock()
	grow := max(retainedSize(pk.TopicName, pk.Payload)-g.retainedSizes[topic], 0)
	if grow > 0 && g.retainedBytes+g.pendingBytes+grow > g.cfg.MaxRetainedBytes {
		return nil, fmt.Errorf("retained messages at their bound of bytes (mqtt.max_retained_bytes %d)", g.cfg.MaxRetainedBytes)
	}
	_, held := g.srv.Topics.Retained.Get(topic)
	_, pending := g.retainPending[topic]
	slot := !held && !pending
	if slot && len(g.retainPending)+int(atomic.LoadInt64(&g.srv.Info.Retained)) >= g.cfg.MaxRetained {
		return nil, fmt.Errorf("retained messages at their bound (mqtt.max_retained %d)", g.cfg.MaxRetained)
	}
	if slot {
		g.retainPending[topic] = struct{}{}
	}
	g.pendingBytes += grow
	return func() {
		g.retainMu.Lock()
		if slot {
			delete(g.retainPending, topic)
		}
		g.pendingBytes -= grow
		g.retainMu.Unlock()
	}, nil
}

// retainedSize is what a retained message counts against
// MaxRetainedBytes: its payload and its topic, which mochi keeps.
func retainedSize(topic string, payload []byte) int64 {
	if len(payload) == 0 {
		return 0
	}
	return int64(len(payload) + len(topic))
}

// sizeRetained records topic's retained message, of size bytes (0: none
// any more), in retainedSizes and retainedBytes.
func (g *Gateway) sizeRetained(topic string, size int64) {
	g.retainMu.Lock()
	defer g.retainMu.Unlock()
	g.retainedBytes += size - g.retainedSizes[topic]
	if size == 0 {
		delete(g.retainedSizes, topic)
	} else {
		g.retainedSizes[topic] = size
	}
}

// RetainedBytes returns the bytes of the retained messages, as counted
// against MaxRetainedBytes.
func (g *Gateway) RetainedBytes() int64 {
	g.retainMu.Lock()
	defer g.retainMu.Unlock()
	return g.retainedBytes
}

// RetainArrived keeps a retained publish that arrived from another site
// (a Petrel message whose mqtt.retain property is set) as its topic's
// retained message here, or deletes the topic's for an empty one, as a
// publish of a client of this node would. One without that property is
// none of its business. One whose topic has no MQTT form, or that would
// add a topic past MaxRetained (counted in petrel_mqtt_refused_total
// {reason="retained"}), is not kept.
func (g *Gateway) RetainArrived(m *message.Message) error {
	if v, ok := m.Properties.Get(propRetain); !ok || !v.Bool() {
		return nil
	}
	name, _, _ := message.ParseDestination(m.Destination)
	topic, err := TopicFromPetrel(name)
	if err != nil {
		return err
	}
	pk := toPacket(m, topic, msgQoS(m), time.Now())
	release, err := g.reserveRetained(pk)
	if err != nil {
		g.metrics.refusedRetained.Add(1)
		return err
	}
	j, err := g.retainer.add(pk, nil, release)
	if err != nil {
		release()
		return err
	}
	return waitCommit(g.ctx, j)
}

// indexRetained puts pk, stored, in mochi's index as its topic's
// retained message (or takes the topic's out, for an empty payload),
// which delivers it to new subscriptions.
func (g *Gateway) indexRetained(pk packets.Packet) {
	_, had := g.srv.Topics.Retained.Get(pk.TopicName)
	g.srv.Topics.RetainMessage(pk.Copy(false))
	g.sizeRetained(pk.TopicName, retainedSize(pk.TopicName, pk.Payload))
	if had != (len(pk.Payload) > 0) {
		g.retainedChanged()
	}
}

// retainedCount counts the topics with a retained message in mochi's
// index, leaving out mochi's own $SYS figures: those retainedSizes
// holds, which sizeRetained keeps beside the index. Walking the index
// instead copied it whole for each new topic, which made storing n
// retained messages cost n² (10,000 took half a minute).
func (g *Gateway) retainedCount() int {
	g.retainMu.Lock()
	defer g.retainMu.Unlock()
	return len(g.retainedSizes)
}

// retainedChanged sets mochi's figure of the retained messages
// ($SYS/broker/retained) to retainedCount, after a topic gained or lost
// its retained message: mochi sets it only when it stores one itself,
// which it never does here (OnPublish has it ignore every publish), so it
// stayed 0. It is set under retainMu, so that the last one to store its
// count saw every change before it.
func (g *Gateway) retainedChanged() {
	g.retainMu.Lock()
	defer g.retainMu.Unlock()
	atomic.StoreInt64(&g.srv.Info.Retained, int64(len(g.retainedSizes)))
}

// publishRef is what a refusal of a publish, or its PUBACK, needs of it.
type publishRef struct {
	topic string
	qos   byte
	id    uint16
}

func refOf(pk packets.Packet) publishRef {
	return publishRef{topic: pk.TopicName, qos: pk.FixedHeader.Qos, id: pk.PacketID}
}

// refuse answers a refused publish. MQTT 5 has reason codes: the PUBACK
// or PUBREC carries one, and the reason string. MQTT 3.1.1 has none, and
// an ack would claim custody: the connection is closed instead, so the
// client knows the message was not taken (MQTT-3.3.5-2 allows either).
// A refused QoS 0 publish is dropped, as MQTT has nothing to answer it
// with.
func (h *hook) refuse(cl *mqtt.Client, pk publishRef, err error) {
	var r *Refusal
	if !errors.As(err, &r) {
		r = &Refusal{Code: CodeUnspecified, Reason: err.Error()}
	}
	// One line per client and code a minute: a client that publishes
	// what is refused, again and again, must not flood the log.
	if held, ok := h.g.refusedLog.Allow(cl.ID + "\x00" + strconv.Itoa(int(r.Code))); ok {
		h.g.log.Info("mqtt publish refused", slog.String("client", cl.ID), slog.String("topic", clip(pk.topic)),
			slog.String("code", fmt.Sprintf("0x%02x", r.Code)), slog.String("reason", r.Reason), slog.Int64("suppressed", held))
	}
	if pk.qos == 0 {
		return
	}
	if cl.Properties.ProtocolVersion < 5 {
		cl.Stop(fmt.Errorf("publish refused: %w", err))
		return
	}
	typ := packets.Puback
	if pk.qos == 2 {
		typ = packets.Pubrec
	}
	ack := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: typ},
		PacketID:    pk.id,
		ReasonCode:  r.Code,
		Properties:  packets.Properties{ReasonString: r.Reason},
	}
	_ = cl.WritePacket(ack)
}

// willSink is where mochi sends the will after OnWill published it.
const willSink = "$petrel/will"
