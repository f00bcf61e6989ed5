package mqttgw

import (
	"github.com/mochi-mqtt/server/v2/packets"
)

// pendingAck is a QoS 1 or 2 publish submitted to the node, whose PUBACK
// or PUBREC waits for its commit. It keeps of the publish only what the PUBACK or a
// refusal needs: a whole packets.Packet is some 600 bytes, copied into
// the queue and out of it for every publish.
type pendingAck struct {
	ref    publishRef
	commit Commit
}

// ackLater queues pk's PUBACK or PUBREC until its commit. One goroutine per
// connection, started with its first QoS 1 or 2 publish and ended with the
// connection, sends them in the order the publishes came (MQTT-4.6.0-2, -3);
// the node commits one connection's publishes in that order too. The
// queue holds the Receive Maximum the node announces: a client with more
// unacknowledged publishes waits here, its next packets unread.
func (st *connState) ackLater(h *hook, ref publishRef, c Commit) {
	st.mu.Lock()
	if st.acks == nil {
		st.acks = make(chan pendingAck, int(st.g.receiveMaximum()))
		st.g.wg.Add(1)
		go func() {
			defer st.g.wg.Done()
			st.ackLoop(h)
		}()
	}
	acks := st.acks
	st.mu.Unlock()
	select {
	case acks <- pendingAck{ref: ref, commit: c}:
	case <-st.ctx.Done():
		// The connection ended: no PUBACK; the client publishes it again.
	}
}

// ackLoop sends the PUBACK of each pending publish once it is committed,
// or refuses it, until the connection ends. What is pending then goes
// unacknowledged, and its client publishes it again (a duplicate QoS 1
// allows). The PUBACKs of the publishes that one commit took go out in
// one write, the connection corked around them.
func (st *connState) ackLoop(h *hook) {
	cc := corkOf(st.cl.Net.Conn)
	// next was taken from acks, its commit not done yet. Values, not
	// pointers, so that nothing here escapes to the heap per publish.
	var next pendingAck
	var held bool
	for {
		p := next
		next = pendingAck{} // its commit is not kept past its answer
		if !held {
			select {
			case <-st.ctx.Done():
				return
			case p = <-st.acks:
			}
		}
		held = false
		if err := waitCommit(st.ctx, p.commit); err != nil && st.ctx.Err() != nil {
			return
		}
		if cc != nil {
			cc.cork()
		}
		st.answer(h, p)
	more:
		for range cap(st.acks) {
			select {
			case a := <-st.acks:
				select {
				case <-a.commit.Done():
					st.answer(h, a)
				default:
					next, held = a, true
					break more
				}
			default:
				break more
			}
		}
		if cc != nil {
			_ = cc.uncork()
		}
	}
}

// answer sends the PUBACK or PUBREC of a committed publish, or its
// refusal.
func (st *connState) answer(h *hook, p pendingAck) {
	err := p.commit.Err()
	if p.ref.qos == 2 {
		h.pubrecDone(st.cl, p.ref.id, p.commit, err)
	}
	if err != nil {
		h.g.metrics.refused.Add(1)
		h.refuse(st.cl, p.ref, err)
		return
	}
	typ := packets.Puback
	if p.ref.qos == 2 {
		typ = packets.Pubrec
	}
	h.g.metrics.published[p.ref.qos].Add(1)
	_ = st.cl.WritePacket(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: typ},
		PacketID:    p.ref.id,
		ReasonCode:  packets.CodeSuccess.Code,
	})
}

// plainPuback reports whether pk, a PUBACK to an MQTT 5 client, says
// success with no property. MQTT 5 then leaves out the reason code and the
// property length (3.4.2.1), so its bytes are those of an MQTT 3.1.1
// PUBACK, and OnPacketEncode has mochi encode it as one: mochi's MQTT 5
// encoder looks every property up in a table of maps first, which cost
// the node 4% of its CPU at one PUBACK per QoS 1 publish.
// TestPlainPubackBytes holds the two encodings equal.
func plainPuback(pk packets.Packet) bool {
	return pk.ProtocolVersion == 5 && pk.ReasonCode == packets.CodeSuccess.Code &&
		pk.Properties.ReasonString == "" && len(pk.Properties.User) == 0
}
