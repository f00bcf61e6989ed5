package mqttgw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Inbound QoS 2 exactly once, across reconnects and node restarts.
//
// mochi catches a QoS 2 PUBLISH sent again before its PUBREL by the
// PUBREC it keeps in the client's in-flight table (MQTT-4.3.3-10), and
// answers a PUBREL by it. That table is memory: a node restart between
// PUBREC and PUBREL lost it, so the client's PUBLISH sent again (DUP) was
// stored a second time, and its PUBREL answered 0x92 (identifier not
// found).
//
// So, for persistent sessions, each PUBREC a publish got is kept in
// mqtt.db (table qos2: client id, packet identifier) from its commit
// until the PUBREL, and handed back to mochi at start as that client's
// in-flight PUBREC (StoredInflightMessages): mochi then catches the
// duplicate and answers the PUBREL as if the node had not stopped. A
// clean session's state ends with its connection, so it keeps none.
//
// The marker is written after the message is committed and before the
// PUBREC goes: a crash between the two leaves a committed message without
// a marker, and its PUBLISH sent again is stored again (the narrow window
// of two fsyncs); the other order would lose the message instead.
//
// Bound: a client's markers are its publishes awaiting PUBREL, at most the
// Receive Maximum the node announces; one more is refused with DISCONNECT
// 0x93 (MQTT-3.3.4-9) and counted in petrel_mqtt_refused_total{reason=
// "qos2_pending"}. mochi's own receive quota bounds them within a
// connection; this bound holds across restarts, whose reconnects reset
// it.
type qos2Markers struct {
	mu      sync.Mutex
	pending map[string]int // markers kept, by client id
	total   int
}

func newQoS2Markers() *qos2Markers { return &qos2Markers{pending: map[string]int{}} }

// qos2Admit reports whether cl may have one more QoS 2 publish awaiting
// its PUBREL; when not, cl is disconnected with 0x93.
func (h *hook) qos2Admit(cl *mqtt.Client) bool {
	q := h.g.qos2
	q.mu.Lock()
	n := q.pending[cl.ID]
	q.mu.Unlock()
	if n < int(h.g.receiveMaximum()) {
		return true
	}
	h.g.metrics.refusedQoS2.Add(1)
	h.g.log.Info("mqtt client past its receive maximum of unreleased QoS 2 publishes", slog.String("client", cl.ID), slog.Int("pending", n))
	_ = h.g.srv.DisconnectClient(cl, packets.ErrReceiveMaximum)
	return false
}

// qos2Received keeps the PUBREC of cl's committed QoS 2 publish id, for a
// persistent session.
func (h *hook) qos2Received(cl *mqtt.Client, id uint16) {
	if !persistent(cl) {
		return
	}
	if err := h.g.store.saveQoS2(h.g.ctx, cl.ID, id); err != nil {
		h.g.log.Warn("mqtt qos 2 publish not marked: a restart before its PUBREL stores it again", slog.String("client", cl.ID), slog.Any("error", err))
		return
	}
	q := h.g.qos2
	q.mu.Lock()
	q.pending[cl.ID]++
	q.total++
	q.mu.Unlock()
}

// qos2Released forgets the PUBREC of cl's publish id: its PUBREL came,
// and its PUBCOMP is about to go (or it came with a failure code).
func (h *hook) qos2Released(cl *mqtt.Client, id uint16) {
	q := h.g.qos2
	q.mu.Lock()
	n, ok := q.pending[cl.ID]
	q.mu.Unlock()
	if !ok || n == 0 {
		return // a clean session, or none kept
	}
	removed, err := h.g.store.dropQoS2(h.g.ctx, cl.ID, id)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			h.g.log.Warn("mqtt qos 2 marker not dropped", slog.String("client", cl.ID), slog.Any("error", err))
		}
		return
	}
	if removed {
		q.mu.Lock()
		q.pending[cl.ID]--
		q.total--
		if q.pending[cl.ID] <= 0 {
			delete(q.pending, cl.ID)
		}
		q.mu.Unlock()
	}
}

// qos2Forget forgets a client's markers: its session ended, or a clean
// start replaced it (dropSession deletes the rows).
func (g *Gateway) qos2Forget(clientID string) {
	q := g.qos2
	q.mu.Lock()
	q.total -= q.pending[clientID]
	delete(q.pending, clientID)
	q.mu.Unlock()
}

// StoredInflightMessages hands mochi, at start, the PUBRECs of the QoS 2
// publishes awaiting their PUBREL.
func (h *hook) StoredInflightMessages() ([]storage.Message, error) {
	ms, err := h.g.store.qos2All(h.g.ctx)
	if err != nil {
		return nil, err
	}
	q := h.g.qos2
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range ms {
		q.pending[m.Client]++
		q.total++
	}
	return ms, nil
}

// OnPacketEncode sees the node's packets just before they are written.
//
// A PUBCOMP (the node sends one only to a client's PUBREL) first drops
// the publish's marker, so that a crash after it leaves none behind: a
// crash before the PUBCOMP goes leaves the client to send its PUBREL
// again, answered 0x92 (not found), and the message is stored once.
//
// A QoS 2 PUBLISH sent again before its PUBREL is answered with a PUBREC
// of success. mochi answers it 0x91 (Packet Identifier in use), a failure
// by which a client learns its message was not taken and drops its flow,
// although the node has it (MQTT-4.3.3-10: the receiver acknowledges it
// again).
func (h *hook) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	switch pk.FixedHeader.Type {
	case packets.Puback:
		if plainPuback(pk) {
			pk.ProtocolVersion = 4
		}
	case packets.Pubcomp:
		h.qos2Released(cl, pk.PacketID)
	case packets.Pubrec:
		if pk.ReasonCode == packets.ErrPacketIdentifierInUse.Code {
			pk.ReasonCode = packets.CodeSuccess.Code
			pk.Properties.ReasonString = ""
		}
	}
	return pk
}

// staleQoS2 drops the marker a new QoS 2 PUBLISH (DUP 0) finds under its
// identifier: a client reuses an identifier only once the PUBCOMP came
// (MQTT-2.2.1-3) and sends a PUBLISH again only with DUP set
// (MQTT-3.3.1-1), so the marker is stale, its removal undone by a power
// loss; mochi would take the new message for the old one, and drop it.
func (h *hook) staleQoS2(cl *mqtt.Client, pk packets.Packet) {
	old, ok := cl.State.Inflight.Get(pk.PacketID)
	if !ok || old.FixedHeader.Type != packets.Pubrec {
		return
	}
	if cl.State.Inflight.Delete(pk.PacketID) {
		atomic.AddInt64(&h.g.srv.Info.Inflight, -1)
	}
	h.qos2Released(cl, pk.PacketID)
	h.g.log.Debug("mqtt stale qos 2 marker dropped", slog.String("client", cl.ID), slog.Int("packet_id", int(pk.PacketID)))
}

// clearOutbound deletes cl's in-flight deliveries, which the Petrel
// subscription gives back and redelivers, and keeps the PUBRECs of its
// publishes awaiting PUBREL, which a resumed session inherits.
func clearOutbound(cl *mqtt.Client) {
	for _, pk := range cl.State.Inflight.GetAll(false) {
		if pk.FixedHeader.Type != packets.Pubrec {
			cl.State.Inflight.Delete(pk.PacketID)
		}
	}
}

func (s *sessionStore) saveQoS2(ctx context.Context, clientID string, id uint16) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO qos2 (client_id, packet_id, created) VALUES (?, ?, ?)
		ON CONFLICT (client_id, packet_id) DO NOTHING`, clientID, id, time.Now().Unix())
	return err
}

// dropQoS2 deletes a marker and reports whether there was one. It does
// not wait for an fsync: a marker a power loss brings back is stale, and
// a stale marker is dropped when its identifier comes with a new message
// (OnPacketRead).
func (s *sessionStore) dropQoS2(ctx context.Context, clientID string, id uint16) (bool, error) {
	res, err := s.lazy.ExecContext(ctx, `DELETE FROM qos2 WHERE client_id = ? AND packet_id = ?`, clientID, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *sessionStore) qos2All(ctx context.Context) ([]storage.Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client_id, packet_id, created FROM qos2 ORDER BY client_id, packet_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.Message
	for rows.Next() {
		var (
			client  string
			id      int64
			created int64
		)
		if err := rows.Scan(&client, &id, &created); err != nil {
			return nil, err
		}
		if id < 1 || id > 65535 {
			return nil, fmt.Errorf("mqtt qos 2 marker of %q: packet identifier %d out of range", client, id)
		}
		out = append(out, storage.Message{
			T: storage.InflightKey, Client: client, PacketID: uint16(id), Created: created,
			FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
		})
	}
	return out, rows.Err()
}
