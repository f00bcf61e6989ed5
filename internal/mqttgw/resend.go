package mqttgw

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/petrelmq/petrel/message"
)

// Deliveries resent under their packet identifiers.
//
// When a client resumes its session, the server resends the QoS 1 and 2
// PUBLISH packets the client had not acknowledged, and the PUBRELs of the
// QoS 2 ones whose PUBREC came, under their original packet identifiers
// (MQTT-4.4.0-1 in 3.1.1; section 4.4 in 5.0). A client tells a QoS 2
// PUBLISH sent again from a new message by its identifier: paho.golang,
// for one, hands a QoS 2 message to its application as the PUBLISH
// arrives and keeps the identifier until the PUBREL. The same message
// under a new identifier is, for it, a second message.
//
// A Petrel subscription gives a connection's deliveries in flight back
// when the connection ends, and delivers them again to the next one. So
// when a persistent session's connection ends, the gateway notes, for
// each delivery in flight, its packet identifier and whether its PUBREC
// came, by the filter it was delivered for and the message's origin and
// id. When the subscription delivers that message again to the session,
// the pump sends it under the noted identifier with DUP set, or sends its
// PUBREL alone. Until then, new deliveries do not take a noted
// identifier.
//
// A QoS 2 delivery to a persistent session is noted in the node's store
// too (outKey): its identifier before its PUBLISH goes, and that its
// PUBREC came before its PUBREL goes, until its PUBCOMP. At start those
// are loaded as notes, so that after a restart, or a crash, the client
// gets the PUBLISH again under the identifier it may know it by, or the
// PUBREL of a message it has, and no new delivery takes an identifier
// whose flow the client may still hold (TestMQTTQoS2DeliveryKilledAnywhere).
// QoS 1 deliveries are noted in memory only: after a restart one that was
// in flight goes again under a new identifier, with DUP set, a second
// delivery, which QoS 1 allows.
//
// Shared subscriptions are not noted: their copies may go to another
// member of the group. A session's notes end with the session (expiry, or
// a clean start), and are bounded: see maxResendNotes.
type resends struct {
	mu    sync.Mutex
	by    map[string]*sessionResends // by client id
	total atomic.Int64               // notes held, for the fast path and the gauge
}

// sessionResends are one session's notes.
type sessionResends struct {
	notes map[resendKey]resendNote
	ids   map[uint16]struct{} // the noted identifiers
}

// resendKey names a delivery across connections.
type resendKey struct {
	filter string
	origin message.NodeID
	id     uint64
}

// resendNote is how a delivery was last sent.
type resendNote struct {
	packetID uint16
	released bool   // its PUBREC came: the PUBREL is what goes again
	mark     string // its key in the node's store (outKey), if any
}

// maxResendNotes bounds one session's notes. A session adds at most its
// deliveries in flight (Config.MaxInflight) each time a connection ends,
// and a note goes when its message is delivered again; notes of messages
// that never come back (expired, purged) stay until the session ends.
// Past the bound a delivery is not noted, and goes again under a new
// identifier, as before notes existed.
func maxResendNotes(cfg Config) int { return min(10*cfg.MaxInflight, 1<<14) }

func newResends() *resends { return &resends{by: map[string]*sessionResends{}} }

// note records how client's delivery k was sent; it reports false past
// the bound.
func (r *resends) note(client string, k resendKey, n resendNote, bound int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		s = &sessionResends{notes: map[resendKey]resendNote{}, ids: map[uint16]struct{}{}}
		r.by[client] = s
	}
	if old, ok := s.notes[k]; ok {
		delete(s.ids, old.packetID)
		r.total.Add(-1)
		delete(s.notes, k)
	}
	if _, taken := s.ids[n.packetID]; taken || len(s.notes) >= bound {
		if len(s.notes) == 0 {
			delete(r.by, client)
		}
		return false
	}
	s.notes[k] = n
	s.ids[n.packetID] = struct{}{}
	r.total.Add(1)
	return true
}

// peek returns the note of client's delivery k.
func (r *resends) peek(client string, k resendKey) (resendNote, bool) {
	if r.total.Load() == 0 {
		return resendNote{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		return resendNote{}, false
	}
	n, ok := s.notes[k]
	return n, ok
}

// drop forgets the note of client's delivery k.
func (r *resends) drop(client string, k resendKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		return
	}
	n, ok := s.notes[k]
	if !ok {
		return
	}
	delete(s.notes, k)
	delete(s.ids, n.packetID)
	if len(s.notes) == 0 {
		delete(r.by, client)
	}
	r.total.Add(-1)
}

// has reports whether client has any note.
func (r *resends) has(client string) bool {
	if r.total.Load() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[client] != nil
}

// reserved reports whether id is noted for one of client's deliveries.
func (r *resends) reserved(client string, id uint16) bool {
	if r.total.Load() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		return false
	}
	_, ok := s.ids[id]
	return ok
}

// forget drops client's notes: its session ended. It returns the store
// keys the notes had, for their removal.
func (r *resends) forget(client string) (marks []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		return nil
	}
	for _, n := range s.notes {
		if n.mark != "" {
			marks = append(marks, n.mark)
		}
	}
	r.total.Add(-int64(len(s.notes)))
	delete(r.by, client)
	return marks
}

// attachMark gives client's note of k, under id, its store key: the
// connection ended while the key was being stored. It reports false when
// there is no such note.
func (r *resends) attachMark(client string, k resendKey, id uint16, mark string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[client]
	if s == nil {
		return false
	}
	n, ok := s.notes[k]
	if !ok || n.packetID != id {
		return false
	}
	n.released, n.mark = true, mark
	s.notes[k] = n
	return true
}

// key is the note key of p's delivery d.
func (p *pump) key(d Delivery) resendKey {
	m := d.Message()
	return resendKey{filter: p.filter, origin: m.Origin, id: m.ID}
}

// The store's keys of QoS 2 deliveries to persistent sessions: sentPrefix
// while the PUBLISH awaits its PUBREC, releasePrefix once the PUBREC came
// and the PUBREL awaits its PUBCOMP. Neither is a prefix of qos2Prefix's
// keys, nor they of either.
const (
	sentPrefix    = "qos2out/"
	releasePrefix = "qos2rel/"
)

// outKey is the store's key of client's delivery k, in flight under id,
// with prefix for how far its flow went. Client id and filter are hex, so
// that no key is a prefix of another client's.
func outKey(prefix, client string, id uint16, k resendKey) string {
	return prefix + hex.EncodeToString([]byte(client)) + "/" + strconv.Itoa(int(id)) + "/" +
		hex.EncodeToString(k.origin[:]) + "/" + strconv.FormatUint(k.id, 10) + "/" + hex.EncodeToString([]byte(k.filter))
}

// parseOutKey is outKey's inverse; released tells the prefix. What the
// store holds is data: a key that outKey would not make again byte for
// byte is refused.
func parseOutKey(key string) (released bool, client string, id uint16, k resendKey, err error) {
	bad := fmt.Errorf("mqtt qos 2 delivery key %q: not %s or %s then <client hex>/<packet id>/<origin hex>/<message id>/<filter hex>", key, sentPrefix, releasePrefix)
	prefix := sentPrefix
	rest, ok := strings.CutPrefix(key, sentPrefix)
	if !ok {
		prefix = releasePrefix
		if rest, ok = strings.CutPrefix(key, releasePrefix); !ok {
			return false, "", 0, resendKey{}, bad
		}
	}
	f := strings.Split(rest, "/")
	if len(f) != 5 {
		return false, "", 0, resendKey{}, bad
	}
	c, err1 := hex.DecodeString(f[0])
	n, err2 := strconv.Atoi(f[1])
	o, err3 := hex.DecodeString(f[2])
	m, err4 := strconv.ParseUint(f[3], 10, 64)
	flt, err5 := hex.DecodeString(f[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || n < 1 || n > 65535 || len(o) != len(k.origin) {
		return false, "", 0, resendKey{}, bad
	}
	k.filter, k.id = string(flt), m
	copy(k.origin[:], o)
	if outKey(prefix, string(c), uint16(n), k) != key {
		return false, "", 0, resendKey{}, bad
	}
	return prefix == releasePrefix, string(c), uint16(n), k, nil
}

// keepsFlow reports whether a QoS 2 delivery for p keeps its flow in the
// store: to a persistent session, whose subscriptions deliver again after
// a restart, and not for a shared filter, whose copies may go to another
// member.
func (p *pump) keepsFlow() bool { return !p.shared && persistent(p.st.cl) }

// keep submits key's storage and gates the connection (see corkConn)
// until it is durable: the packet written next, and all after it, wait
// for the commit, and the connection's reader and pump do not; what
// comes meanwhile shares the commit. then runs once it is durable, if it
// is. A key that fails to commit (a full store) is logged, and the
// packets go all the same: the client's flow is not held up by the
// node's own state. keep reports whether the key was submitted.
func (st *connState) keep(key string, then func()) bool {
	c, err := st.g.be.Mark(key)
	if err != nil {
		st.keyFailed(err)
		return false
	}
	done := func(err error) {
		st.keyFailed(err)
		if err == nil && then != nil {
			then()
		}
	}
	cc := corkOf(st.cl.Net.Conn)
	if cc == nil {
		done(waitCommit(st.g.ctx, c))
		return true
	}
	cc.gate()
	st.g.wg.Add(1)
	go func() {
		defer st.g.wg.Done()
		// The store finishes every op it took; a gateway that closes
		// first (its connections are going) does not wait for it.
		select {
		case <-c.Done():
			done(c.Err())
		case <-st.g.ctx.Done():
		}
		_ = cc.ungate()
	}()
	return true
}

// keyFailed logs a delivery's key that did not commit.
// One line a minute: a full store fails every delivery's key.
func (st *connState) keyFailed(err error) {
	if err == nil {
		return
	}
	if held, ok := st.g.keyLog.Allow(""); ok {
		st.g.log.Warn("mqtt qos 2 delivery's state not kept: after a restart it may go again as a new message",
			slog.String("client", st.cl.ID), slog.Int64("suppressed", held), slog.Any("error", err))
	}
}

// markSent keeps, before the PUBLISH of a QoS 2 delivery goes, the
// identifier it goes under: a crash before its PUBREC came then leaves
// the client perhaps with the message and the node with the key, and the
// resumed session gets the PUBLISH again under the same identifier, with
// DUP, which the client knows (MQTT-4.3.3-10 on its side). It returns the
// key, "" if none was kept.
func (p *pump) markSent(id uint16, d Delivery) string {
	st := p.st
	key := outKey(sentPrefix, st.cl.ID, id, p.key(d))
	if !st.keep(key, nil) {
		return ""
	}
	return key
}

// markReleased keeps, durably, that the client's PUBREC of delivery id
// came, before mochi's PUBREL answering it reaches the client: a crash
// after the PUBREL went, and before the PUBCOMP came, then leaves the
// client with the message and the node with its key, and the resumed
// session gets the PUBREL again, not the message. The delivery's sent key
// goes once this one is durable.
func (st *connState) markReleased(id uint16) {
	st.mu.Lock()
	f, ok := st.inflight[id]
	st.mu.Unlock()
	if !ok || f.p.shared || f.released || !persistent(st.cl) {
		return
	}
	k := f.p.key(f.d)
	key := outKey(releasePrefix, st.cl.ID, id, k)
	if !st.keep(key, func() { st.g.unmarkLater(st.cl.ID, f.mark) }) {
		return
	}
	st.mu.Lock()
	if g, ok := st.inflight[id]; ok && g.d == f.d {
		g.mark, g.released = key, true
		st.inflight[id] = g
		st.mu.Unlock()
		return
	}
	st.mu.Unlock()
	// The connection ended meanwhile, and noted the delivery (or not,
	// past the bound: then the key goes).
	if !st.g.resends.attachMark(st.cl.ID, k, id, key) {
		st.g.unmarkLater(st.cl.ID, key)
	}
}

// unmarkLater removes a store key without holding up the caller, an MQTT
// connection's reader: on one of the gateway's goroutines, which Close
// waits for, and with a context Close does not cancel, since the store
// outlives the gateway. A failure leaves a key that the session's end
// removes.
func (g *Gateway) unmarkLater(client, key string) {
	if key == "" {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.unmarkWith(context.WithoutCancel(g.ctx), client, key)
	}()
}

// loadKept makes, at start, a note of each QoS 2 delivery whose flow a
// persistent session had in flight (see resends). A key of a session that
// is gone, one past the bound, a sent key whose release key is there too
// (a crash came between the two), and one that does not parse (a damaged
// store) are removed, the last with a warning.
func (g *Gateway) loadKept(ctx context.Context, known map[string]bool) error {
	keys, err := g.be.Marks(ctx, "qos2")
	if err != nil {
		return err
	}
	bound := maxResendNotes(g.cfg)
	var stale []string
	for _, key := range keys {
		if !strings.HasPrefix(key, sentPrefix) && !strings.HasPrefix(key, releasePrefix) {
			continue // an inbound publish's marker (qos2Prefix)
		}
		released, client, id, k, err := parseOutKey(key)
		if err != nil {
			g.log.Warn("mqtt qos 2 delivery key unreadable, removed", slog.Any("error", err))
			stale = append(stale, key)
			continue
		}
		if !known[client] {
			stale = append(stale, key)
			continue
		}
		// sentPrefix sorts before releasePrefix: a release key finds its
		// delivery's sent key noted, and replaces it.
		if old, ok := g.resends.peek(client, k); ok && old.mark != "" {
			stale = append(stale, old.mark)
		}
		if !g.resends.note(client, k, resendNote{packetID: id, released: released, mark: key}, bound) {
			stale = append(stale, key)
		}
	}
	g.unmark("", stale...)
	return nil
}
