package mqttgw

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
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
// So, for persistent sessions, each QoS 2 publish stores a marker, the
// key qos2/<client id in hex>/<packet identifier>, in the node's store,
// in the same transaction as the message's copies (Backend.Publish's
// mark): after a crash, wherever it lands, the marker is there if and
// only if the message is. The PUBREC goes after that commit. At start the
// markers are handed back to mochi as their clients' in-flight PUBRECs
// (StoredInflightMessages): mochi then catches the duplicate and answers
// the PUBREL as if the node had not stopped. The PUBREL removes the
// marker, durably, before the PUBCOMP goes. A clean session's state ends
// with its connection, so it keeps none.
//
// Earlier versions kept the marker in mqtt.db, written after the commit:
// a crash between the two stored the message again when its PUBLISH came
// again. Such markers are moved to the node's store at start.
//
// Bound: a client's markers are its publishes awaiting PUBREL, at most the
// Receive Maximum the node announces; one more is refused with DISCONNECT
// 0x93 (MQTT-3.3.4-9) and counted in petrel_mqtt_refused_total{reason=
// "qos2_pending"}. mochi's own receive quota bounds them within a
// connection; this bound holds across restarts, whose reconnects reset
// it.
type qos2Markers struct {
	mu      sync.Mutex
	pending map[string]map[uint16]struct{} // markers kept, by client id
	total   int
	// commits are the QoS 2 publishes whose PUBREC waits for their
	// commit, by client id and packet identifier (awaitPubrec).
	commits map[string]map[uint16]Commit
}

func newQoS2Markers() *qos2Markers {
	return &qos2Markers{pending: map[string]map[uint16]struct{}{}, commits: map[string]map[uint16]Commit{}}
}

// A QoS 2 publish's PUBREC goes once its commit is done, from the
// connection's acker (ackLater), so that the reader takes the next
// publishes meanwhile and they share the commit: awaiting each commit on
// the reader made a client's QoS 2 publishes one commit each. The PUBREC
// entry of mochi's in-flight table is set at once, as mochi sets it for
// its own: the PUBREL finds it, and a PUBLISH sent again under its
// identifier (MQTT-4.3.3-10) is caught by it rather than stored twice.
// Such a PUBLISH comes only on a new connection of the session, and may
// come before that commit is done: OnPacketRead then waits for it
// (pendingPubrec), and if the commit failed, the entry goes, and the
// PUBLISH is taken as the first.

// awaitPubrec sets cl's PUBREC entry for id, whose publish was submitted
// with mark and commits with c, and notes c.
func (h *hook) awaitPubrec(cl *mqtt.Client, id uint16, mark string, c Commit) {
	// As mochi does for its own PUBREC; the PUBCOMP gives it back.
	cl.State.Inflight.DecreaseReceiveQuota()
	rec := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrec}, PacketID: id, Created: time.Now().Unix()}
	h.g.inflightSet(cl, rec)
	q := h.g.qos2
	if mark != "" {
		q.add(cl.ID, id)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.commits[cl.ID]
	if ids == nil {
		ids = map[uint16]Commit{}
		q.commits[cl.ID] = ids
	}
	ids[id] = c
}

// pubrecDone settles id's commit c, which ended with err. The first to
// settle it forgets it and, when it failed, takes back what awaitPubrec
// set: the client learns its publish was not taken, and may send it
// again under the same identifier.
func (h *hook) pubrecDone(cl *mqtt.Client, id uint16, c Commit, err error) {
	q := h.g.qos2
	q.mu.Lock()
	first := q.commits[cl.ID][id] == c
	if first {
		delete(q.commits[cl.ID], id)
		if len(q.commits[cl.ID]) == 0 {
			delete(q.commits, cl.ID)
		}
	}
	q.mu.Unlock()
	if !first || err == nil {
		return
	}
	if h.g.inflightDelete(cl, id) {
		cl.State.Inflight.IncreaseReceiveQuota()
	}
	q.remove(cl.ID, id) // its marker did not commit
}

// pendingPubrec waits, for a PUBLISH sent again under id, until the
// commit of the first one is done, if it is not: its PUBREC entry then
// answers it only if that publish was taken.
func (h *hook) pendingPubrec(cl *mqtt.Client, id uint16) {
	q := h.g.qos2
	q.mu.Lock()
	c := q.commits[cl.ID][id]
	q.mu.Unlock()
	if c == nil {
		return
	}
	h.pubrecDone(cl, id, c, waitCommit(h.g.ctx, c))
}

// qos2Prefix starts every marker's key.
const qos2Prefix = "qos2/"

// qos2Key is the marker of client's publish id. The client id is hex, so
// that no client id is a prefix of another's keys.
func qos2Key(client string, id uint16) string {
	return qos2Prefix + hex.EncodeToString([]byte(client)) + "/" + strconv.Itoa(int(id))
}

// parseQoS2Key is qos2Key's inverse.
func parseQoS2Key(key string) (client string, id uint16, err error) {
	c, n, ok := strings.Cut(strings.TrimPrefix(key, qos2Prefix), "/")
	b, herr := hex.DecodeString(c)
	v, nerr := strconv.Atoi(n)
	// The key it makes again, byte for byte: no "+7", "07" or upper case
	// hex, which would name the same marker twice.
	if !ok || !strings.HasPrefix(key, qos2Prefix) || herr != nil || nerr != nil || v < 1 || v > 65535 ||
		qos2Key(string(b), uint16(v)) != key {
		return "", 0, fmt.Errorf("mqtt qos 2 marker %q: not <client id in lower case hex>/<packet identifier 1-65535>", key)
	}
	return string(b), uint16(v), nil
}

// add counts a marker, once however often it is added.
func (q *qos2Markers) add(client string, id uint16) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.pending[client]
	if ids == nil {
		ids = map[uint16]struct{}{}
		q.pending[client] = ids
	}
	if _, ok := ids[id]; !ok {
		ids[id] = struct{}{}
		q.total++
	}
}

// remove forgets a marker; it reports whether there was one.
func (q *qos2Markers) remove(client string, id uint16) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.pending[client]
	if _, ok := ids[id]; !ok {
		return false
	}
	delete(ids, id)
	q.total--
	if len(ids) == 0 {
		delete(q.pending, client)
	}
	return true
}

// qos2Admit reports whether cl may have one more QoS 2 publish awaiting
// its PUBREL; when not, cl is disconnected with 0x93.
func (h *hook) qos2Admit(cl *mqtt.Client) bool {
	q := h.g.qos2
	q.mu.Lock()
	n := len(q.pending[cl.ID])
	q.mu.Unlock()
	if n < int(h.g.receiveMaximum()) {
		return true
	}
	h.g.metrics.refusedQoS2.Add(1)
	h.qos2Cut.Store(cl, struct{}{}) // counted here, not again at OnDisconnect
	h.g.log.Info("mqtt client past its receive maximum of unreleased QoS 2 publishes", slog.String("client", cl.ID), slog.Int("pending", n))
	_ = h.g.srv.DisconnectClient(cl, packets.ErrReceiveMaximum)
	return false
}

// qos2Mark returns the marker a QoS 2 publish of cl stores with its
// message: none for a clean session.
func qos2Mark(cl *mqtt.Client, pk packets.Packet) string {
	if pk.FixedHeader.Qos != 2 || !persistent(cl) {
		return ""
	}
	return qos2Key(cl.ID, pk.PacketID)
}

// qos2Released removes the marker of cl's publish id: its PUBREL came,
// and its PUBCOMP is about to go (or it came with a failure code). A
// crash before the removal commits leaves the marker: mochi then sends
// its PUBREC again to the resumed session, which answers with a PUBREL,
// and a new message under its identifier drops it (staleQoS2).
func (h *hook) qos2Released(cl *mqtt.Client, id uint16) {
	if !h.g.qos2.remove(cl.ID, id) {
		return // a clean session, or none kept
	}
	h.g.unmark(cl.ID, qos2Key(cl.ID, id))
}

// unmark removes markers, those of client when it is not "". A failure
// leaves them to the next start, which removes markers whose session is
// gone and hands the others back, so it is only logged.
func (g *Gateway) unmark(client string, keys ...string) { g.unmarkWith(g.ctx, client, keys...) }

func (g *Gateway) unmarkWith(ctx context.Context, client string, keys ...string) {
	if len(keys) == 0 {
		return
	}
	if err := g.be.Unmark(ctx, keys...); err != nil && !errors.Is(err, context.Canceled) {
		attrs := []any{slog.Int("markers", len(keys)), slog.Any("error", err)}
		if client != "" {
			attrs = append(attrs, slog.String("client", client))
		}
		g.log.Warn("mqtt qos 2 markers not dropped", attrs...)
	}
}

// qos2Forget drops a client's markers, and its notes of deliveries to
// resend: its session ended, or a clean start replaced it.
func (g *Gateway) qos2Forget(clientID string) {
	marks := g.resends.forget(clientID)
	q := g.qos2
	q.mu.Lock()
	delete(q.commits, clientID)
	ids := q.pending[clientID]
	q.total -= len(ids)
	delete(q.pending, clientID)
	q.mu.Unlock()
	keys := make([]string, 0, len(ids))
	for id := range ids {
		keys = append(keys, qos2Key(clientID, id))
	}
	g.unmark(clientID, append(keys, marks...)...)
}

// StoredInflightMessages hands mochi, at start, the PUBRECs of the QoS 2
// publishes awaiting their PUBREL: the markers in the node's store, once
// those of earlier versions moved there. It loads the notes of QoS 2
// deliveries in flight to persistent sessions too (loadKept), which mochi has no
// part in. A marker of a session that no
// longer exists (a crash came between the session's end and the
// removal of its markers) is removed, and so is a key that is no marker
// (a damaged store), with a warning: neither stops the node.
func (h *hook) StoredInflightMessages() ([]storage.Message, error) {
	ctx := h.g.ctx
	if err := h.g.moveLegacyQoS2(ctx); err != nil {
		return nil, err
	}
	keys, err := h.g.be.Marks(ctx, qos2Prefix)
	if err != nil {
		return nil, err
	}
	sessions, err := h.g.store.sessions(ctx)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		known[s.ID] = true
	}
	now := time.Now().Unix()
	var out []storage.Message
	// The markers to remove go in one request: one commit, not one each.
	var stale []string
	for _, k := range keys {
		client, id, err := parseQoS2Key(k)
		if err != nil {
			h.g.log.Warn("mqtt qos 2 marker unreadable, removed", slog.Any("error", err))
			stale = append(stale, k)
			continue
		}
		if !known[client] {
			stale = append(stale, k)
			continue
		}
		h.g.qos2.add(client, id)
		out = append(out, storage.Message{
			T: storage.InflightKey, Client: client, PacketID: id, Created: now,
			FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
		})
	}
	h.g.unmark("", stale...)
	if err := h.g.loadKept(ctx, known); err != nil {
		return nil, err
	}
	return out, nil
}

// moveLegacyQoS2 moves the markers an earlier version kept in mqtt.db to
// the node's store: each is stored there, durably, before the rows go.
func (g *Gateway) moveLegacyQoS2(ctx context.Context) error {
	rows, err := g.store.legacyQoS2(ctx)
	if err != nil || len(rows) == 0 {
		return err
	}
	for _, r := range rows {
		c, err := g.be.Mark(qos2Key(r.client, r.id))
		if err == nil {
			err = waitCommit(ctx, c)
		}
		if err != nil {
			return fmt.Errorf("move mqtt qos 2 marker of %q: %w", r.client, err)
		}
	}
	return g.store.dropLegacyQoS2(ctx)
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
//
// An MQTT 5 CONNACK of success announces the topic aliases a client may
// use (maxTopicAliases), which mochi enforces but does not announce: a
// client that keeps to the specification used none (MQTT-3.2.2-17/-18).
// It announces the Maximum Packet Size too (3.2.2.3.6), which mochi
// enforces (Capabilities.MaximumPacketSize) and does not announce either:
// a client had no way to learn why a large publish closed its connection.
//
// An MQTT 3.1.1 CONNACK refusing an empty client id with clean session 0
// says 0x02 identifier rejected (MQTT-3.1.3-8): mochi refuses it with its
// MQTT 5 code 0x80, which it has no 3.1.1 code for, and sends 0x80, which
// 3.1.1 does not define. mochi assigned the client an id already, which
// is how an empty one is told here.
func (h *hook) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	switch pk.FixedHeader.Type {
	case packets.Connack:
		switch {
		case cl == nil:
		case pk.ReasonCode == packets.CodeSuccess.Code && cl.Properties.ProtocolVersion >= 5:
			pk.Properties.TopicAliasMaximum = maxTopicAliases
			pk.Properties.MaximumPacketSize = h.g.srv.Options.Capabilities.MaximumPacketSize
		case pk.ReasonCode == packets.ErrUnspecifiedError.Code && cl.Properties.ProtocolVersion < 5 &&
			!cl.Properties.Clean && cl.Properties.Props.AssignedClientID != "":
			pk.ReasonCode = packets.Err3ClientIdentifierNotValid.Code
		}
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
// (MQTT-3.3.1-1), so the marker is stale: a crash came after its PUBREL
// and before its removal committed. mochi would take the new message for
// the old one, and drop it.
func (h *hook) staleQoS2(cl *mqtt.Client, pk packets.Packet) {
	old, ok := cl.State.Inflight.Get(pk.PacketID)
	if !ok || old.FixedHeader.Type != packets.Pubrec {
		return
	}
	h.g.inflightDelete(cl, pk.PacketID)
	h.qos2Released(cl, pk.PacketID)
	h.g.log.Debug("mqtt stale qos 2 marker dropped", slog.String("client", cl.ID), slog.Int("packet_id", int(pk.PacketID)))
}

// clearOutbound deletes cl's in-flight deliveries, which the Petrel
// subscription gives back and redelivers, and keeps the PUBRECs of its
// publishes awaiting PUBREL, which a resumed session inherits.
func (g *Gateway) clearOutbound(cl *mqtt.Client) {
	for _, pk := range cl.State.Inflight.GetAll(false) {
		if pk.FixedHeader.Type != packets.Pubrec {
			g.inflightDelete(cl, pk.PacketID)
		}
	}
}

// legacyMarker is a QoS 2 marker row of mqtt.db.
type legacyMarker struct {
	client string
	id     uint16
}

func (s *sessionStore) legacyQoS2(ctx context.Context) ([]legacyMarker, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client_id, packet_id FROM qos2 ORDER BY client_id, packet_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []legacyMarker
	for rows.Next() {
		var (
			client string
			id     int64
		)
		if err := rows.Scan(&client, &id); err != nil {
			return nil, err
		}
		if id < 1 || id > 65535 {
			return nil, fmt.Errorf("mqtt qos 2 marker of %q: packet identifier %d out of range", client, id)
		}
		out = append(out, legacyMarker{client, uint16(id)})
	}
	return out, rows.Err()
}

func (s *sessionStore) dropLegacyQoS2(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM qos2`)
	return err
}
