package mqttgw

import (
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
// The notes are memory: a node restart loses them, and what was in flight
// is then delivered again under new identifiers, with DUP set. Shared
// subscriptions are not noted: their copies may go to another member of
// the group. A session's notes end with the session (expiry, or a clean
// start), and are bounded: see maxResendNotes.
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
	released bool // its PUBREC came: the PUBREL is what goes again
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

// forget drops client's notes: its session ended.
func (r *resends) forget(client string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.by[client]; s != nil {
		r.total.Add(-int64(len(s.notes)))
		delete(r.by, client)
	}
}

// keyOf is the note key of a delivery of m for filter.
func keyOf(filter string, m *message.Message) resendKey {
	return resendKey{filter: filter, origin: m.Origin, id: m.ID}
}
