package mqttgw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
)

// hook is the gateway inside mochi: authentication, publishes to the
// node, subscriptions as Petrel subscriptions, acks of deliveries, and the
// persistence of sessions and retained messages.
type hook struct {
	mqtt.HookBase
	g *Gateway

	pending sync.Map // *mqtt.Client -> Conn, from authentication to OnDisconnect
	proven  sync.Map // *mqtt.Client -> Conn (identity and proof), from OnConnect to OnConnectAuthenticate
	// willProps are the will of a CONNECT with its properties (mochi
	// keeps only the user properties), from authentication to
	// OnDisconnect.
	willProps sync.Map // *mqtt.Client -> connectWill
	// willDone holds the connections whose will was handled, so that it
	// goes once (OnWill, willsAtClose), until OnDisconnect.
	willDone sync.Map // *mqtt.Client -> struct{}
	// qos2Cut holds the connections qos2Admit disconnected with 0x93,
	// counted there, so that OnDisconnect does not count them again.
	qos2Cut sync.Map // *mqtt.Client -> struct{}

	mu    sync.Mutex
	conns map[*mqtt.Client]*connState
}

var provided = []byte{
	mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnSessionEstablish, mqtt.OnSessionEstablished,
	mqtt.OnDisconnect, mqtt.OnPublish, mqtt.OnSubscribed, mqtt.OnUnsubscribed, mqtt.OnQosComplete,
	mqtt.OnQosDropped, mqtt.OnWill, mqtt.OnClientExpired, mqtt.OnRetainedExpired,
	mqtt.StoredClients, mqtt.StoredSubscriptions, mqtt.StoredRetainedMessages, mqtt.StoredInflightMessages,
	mqtt.OnPacketEncode, mqtt.OnPacketRead,
	mqtt.OnSubscribe, mqtt.OnPacketProcessed, mqtt.OnRetainPublished, mqtt.OnPublishDropped,
}

func (h *hook) ID() string { return "petrel" }

func (h *hook) Provides(b byte) bool { return bytes.IndexByte(provided, b) >= 0 }

// persistent reports whether cl's session outlives its connection: MQTT 5
// with a session expiry interval, MQTT 3 without clean session.
func persistent(cl *mqtt.Client) bool {
	if cl.Properties.ProtocolVersion == 5 {
		return cl.Properties.Props.SessionExpiryInterval > 0
	}
	return !cl.Properties.Clean
}

// SessionPrefix starts the names of the persistent sessions' Petrel
// subscriptions (durableName), and SharePrefix those of the shared
// groups' (shareName): the node refuses both to its remote clients, which
// could otherwise compute a session's name and drain it.
const (
	SessionPrefix = "mqtt."
	SharePrefix   = sharePrefix
)

// durableName names the durable Petrel subscription of a persistent
// session's filter: "mqtt." then up to 40 bytes of the client id that
// are name bytes (for whoever reads petrel topics), then hashes of the
// client id and of the filter, which make it unique.
func durableName(clientID, filter string) string {
	var b strings.Builder
	b.WriteString(SessionPrefix)
	for i := 0; i < len(clientID) && b.Len() < 45; i++ {
		c := clientID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		}
	}
	ch := sha256.Sum256([]byte(clientID))
	fh := sha256.Sum256([]byte(filter))
	b.WriteByte('.')
	b.WriteString(hex.EncodeToString(ch[:6]))
	b.WriteByte('.')
	b.WriteString(hex.EncodeToString(fh[:6]))
	return b.String()
}

// OnConnect refuses a client past MaxClients, or one that would add a
// persistent session past MaxSessions, before it is authenticated or
// costs a session: MQTT 5 gets CONNACK 0x97 quota exceeded, MQTT 3.1.1
// 0x03 server unavailable (it has no quota code). mochi's own bound
// (Capabilities.MaximumClients) is left off: it refuses before any hook,
// so it could not be counted. Clients connecting at the very same moment
// may pass the checks together, and overshoot a bound by that many.
func (h *hook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if cc := corkOf(cl.Net.Conn); cc != nil {
		if cc.pre != nil {
			cc.pre.connected()
		}
		if cc.size != nil {
			// MQTT 3.1.1 has no DISCONNECT from the node, but its
			// packets claim their bytes all the same.
			cc.size.v5 = cl.Properties.ProtocolVersion >= 5
			cc.size.claiming = true
		}
	}
	if atomic.LoadInt64(&h.g.srv.Info.ClientsConnected) >= int64(h.g.cfg.MaxClients) {
		return h.refuseConnect(cl, "clients", &h.g.metrics.refusedClients)
	}
	if persistent(cl) && !h.hasPersistent(cl.ID) && h.persistentSessions() >= h.g.cfg.MaxSessions {
		return h.refuseConnect(cl, "sessions", &h.g.metrics.refusedSessions)
	}
	// Authenticated here rather than in OnConnectAuthenticate, where
	// mochi answers every refusal as bad credentials: a client id held by
	// another identity gets its own reason code.
	id, proof, err := h.authenticate(cl, pk)
	if err != nil {
		h.g.metrics.authFailed.Add(1)
		h.g.log.Info("mqtt connection refused", slog.String("client", cl.ID), slog.String("remote", cl.Net.Remote), slog.Any("error", err))
		_ = h.g.srv.SendConnack(cl, packets.ErrBadUsernameOrPassword, false, nil)
		return packets.ErrBadUsernameOrPassword
	}
	owner, held, err := h.owner(cl.ID)
	if err != nil {
		h.g.log.Warn("mqtt connection refused: session owner not read", slog.String("client", cl.ID), slog.Any("error", err))
		_ = h.g.srv.SendConnack(cl, packets.ErrServerUnavailable, false, nil)
		return packets.ErrServerUnavailable
	}
	if held && owner != id {
		return h.refuseClientID(cl, id, owner)
	}
	h.proven.Store(cl, Conn{Identity: id, Proof: proof})
	return nil
}

// authenticate returns the identity cl's CONNECT proves, and the
// Backend's note of the credential (Conn.Proof).
func (h *hook) authenticate(cl *mqtt.Client, pk packets.Packet) (string, string, error) {
	var certCN string
	// A *tls.Conn, or a wss connection (wsConn).
	if tc, ok := cl.Net.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		cs := tc.ConnectionState()
		if len(cs.VerifiedChains) > 0 && len(cs.PeerCertificates) > 0 {
			certCN = cs.PeerCertificates[0].Subject.CommonName
		}
	}
	return h.g.be.Authenticate(string(cl.Properties.Username), pk.Connect.Password, certCN)
}

// owner returns the identity whose session holds clientID: the one
// connected with it now, else the one that made its stored persistent
// session, and false when no session holds it. A session is its
// identity's: its subscriptions were authorized for that identity, and
// resuming or taking it over as another would hand that identity's
// messages, and its will, to whoever claims the client id; a clean start
// would discard them. A session stored before sessions had an owner
// (addOwnerColumn) is held by nobody, so the first identity to resume it
// takes it. An error reading the store refuses the connection (server
// unavailable) rather than trust it.
func (h *hook) owner(clientID string) (string, bool, error) {
	if old, ok := h.g.srv.Clients.Get(clientID); ok {
		if st := h.conn(old); st != nil {
			return st.conn.Identity, true, nil
		}
	}
	owner, ok, err := h.g.store.sessionOwner(h.g.ctx, clientID)
	if err != nil {
		return "", false, err
	}
	return owner, ok && owner != "", nil
}

// refuseClientID answers cl's CONNECT, which identity proved, with client
// identifier not valid (0x85; 0x02 identifier rejected for MQTT 3.1.1):
// its client id holds owner's session. Counted and logged; the session is
// untouched.
func (h *hook) refuseClientID(cl *mqtt.Client, identity, owner string) error {
	h.g.metrics.refusedOwner.Add(1)
	h.g.log.Info("mqtt connection refused", slog.String("client", cl.ID), slog.String("remote", cl.Net.Remote),
		slog.String("identity", identity), slog.String("reason", "the client id holds a session of another identity"))
	code := packets.ErrClientIdentifierNotValid
	if cl.Properties.ProtocolVersion >= 5 {
		// The reason string says why; MQTT 3.1.1 has none (and mochi
		// maps only its own codes to 3.1.1's).
		code = packets.Code{Code: code.Code, Reason: "client identifier held by another identity's session"}
	}
	_ = h.g.srv.SendConnack(cl, code, false, nil)
	return code
}

// hasPersistent reports whether id has a persistent session already,
// which a new connection resumes or replaces without adding one.
func (h *hook) hasPersistent(id string) bool {
	old, ok := h.g.srv.Clients.Get(id)
	return ok && persistent(old)
}

// persistentSessions counts the persistent sessions mochi holds,
// connected or not, those loaded from the store at start included.
func (h *hook) persistentSessions() int {
	n := 0
	for _, cl := range h.g.srv.Clients.GetAll() {
		if persistent(cl) {
			n++
		}
	}
	return n
}

// refuseConnect answers cl's CONNECT with quota exceeded (server
// unavailable for MQTT 3.1.1), counts it and closes the connection.
func (h *hook) refuseConnect(cl *mqtt.Client, bound string, n *atomic.Int64) error {
	n.Add(1)
	code := packets.ErrQuotaExceeded
	if cl.Properties.ProtocolVersion < 5 {
		code = packets.ErrServerUnavailable
	}
	h.g.log.Info("mqtt connection refused", slog.String("client", cl.ID), slog.String("remote", cl.Net.Remote), slog.String("bound", bound))
	_ = h.g.srv.SendConnack(cl, code, false, nil)
	return code
}

// OnConnectAuthenticate takes the identity OnConnect proved, which always
// runs first, and lets the interceptors refuse the connection.
func (h *hook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	v, ok := h.proven.LoadAndDelete(cl)
	if !ok {
		return false
	}
	c := v.(Conn)
	c.ClientID, c.Remote = cl.ID, cl.Net.Remote
	if err := h.g.be.Connect(h.g.ctx, c); err != nil {
		h.g.log.Info("mqtt connection refused", slog.String("client", cl.ID), slog.Any("error", err))
		return false
	}
	h.pending.Store(cl, c)
	if pk.Connect.WillFlag {
		h.willProps.Store(cl, newConnectWill(pk))
	}
	return true
}

// OnPacketRead notes a DISCONNECT that discards the will (any reason but
// 0x04, MQTT-3.1.2-10), for willsAtClose (mochi's own note of it is no
// field another goroutine may read); refuses a publish to a '$' topic
// that mochi drops (refuseDollar); drops a stale QoS 2 marker
// (staleQoS2); lets a QoS 2 PUBLISH sent again wait for the first one's
// commit (pendingPubrec); and keeps a QoS 2 delivery's PUBREC
// (markReleased).
func (h *hook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	switch {
	case pk.FixedHeader.Type == packets.Disconnect && pk.ReasonCode != packets.CodeDisconnectWillMessage.Code:
		h.willProps.Delete(cl)
	case pk.FixedHeader.Type == packets.Publish && strings.HasPrefix(pk.TopicName, "$") && !mqtt.IsValidFilter(pk.TopicName, true):
		// mochi drops it without an ack ($SYS, or a wildcard): the
		// refusal is answered here. Any other '$' topic reaches
		// OnPublish, which answers it, as a publish to any topic;
		// answering here as well sent two acks for one packet
		// identifier.
		h.refuseDollar(cl, pk)
	case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 2 && !pk.FixedHeader.Dup:
		h.staleQoS2(cl, pk)
	case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 2:
		h.pendingPubrec(cl, pk.PacketID)
	case pk.FixedHeader.Type == packets.Pubrec && pk.ReasonCode < packets.ErrUnspecifiedError.Code:
		// Before mochi answers it with the PUBREL.
		if st := h.conn(cl); st != nil {
			st.markReleased(pk.PacketID)
		}
	}
	return pk, nil
}

// refuseDollar answers a client's publish to a '$' topic (the broker's
// own, such as $SYS; MQTT-4.7.2-1), once: from OnPacketRead for what
// mochi drops without an ack (a QoS 1 or 2 publisher then waited for it
// for ever), from OnPublish for the rest. MQTT 5 gets its PUBACK or
// PUBREC with 0x90 (Topic Name invalid); MQTT 3.1.1, which has no failure
// to acknowledge with, loses the connection (MQTT-3.3.5-2).
func (h *hook) refuseDollar(cl *mqtt.Client, pk packets.Packet) {
	h.g.metrics.refused.Add(1)
	h.refuse(cl, refOf(pk), &Refusal{Code: CodeTopicNameBad, Reason: "the broker's '$' topics take no publish"})
}

// OnSessionEstablish runs before mochi takes over an existing session of
// the same client id: the old connection's deliveries stop, and what it
// had in flight goes back to its subscriptions (redelivered, with DUP,
// to the new connection) rather than being resent by mochi as well. The
// old connection's will is settled here (takenOverWill).
func (h *hook) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	h.establishing(cl, pk.Connect.Clean)
	if old, ok := h.g.srv.Clients.Get(cl.ID); ok && old != cl {
		h.takenOverWill(old)
		h.detach(old)
		h.g.clearOutbound(old)
	}
}

func (h *hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	v, ok := h.pending.Load(cl)
	if !ok {
		return
	}
	st := newConnState(h.g, cl, v.(Conn))
	h.mu.Lock()
	h.conns[cl] = st
	h.mu.Unlock()
	h.g.metrics.connections.Add(1)
	h.g.metrics.connected.Add(1)
	ctx := h.g.ctx
	if cl.Properties.Clean || !persistent(cl) {
		// A clean start, or a session that ends with its connection: no
		// state of an old session stays.
		if err := h.g.store.dropSession(ctx, cl.ID); err != nil {
			h.g.log.Warn("mqtt session not dropped", slog.String("client", cl.ID), slog.Any("error", err))
		}
		h.g.qos2Forget(cl.ID)
	}
	if persistent(cl) {
		if err := h.g.store.saveSession(ctx, cl, st.conn.Identity); err != nil {
			h.g.log.Warn("mqtt session not saved", slog.String("client", cl.ID), slog.Any("error", err))
		}
	}
	// A resumed session's filters (taken over, or loaded at start) are
	// durable Petrel subscriptions already: join those it may still hold.
	h.resume(st)
}

func (h *hook) conn(cl *mqtt.Client) *connState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[cl]
}

// detach stops cl's deliveries and gives back what it had in flight.
func (h *hook) detach(cl *mqtt.Client) {
	h.mu.Lock()
	st := h.conns[cl]
	delete(h.conns, cl)
	h.mu.Unlock()
	if st == nil {
		return
	}
	st.stop()
	h.g.metrics.connections.Add(-1)
	h.g.be.Disconnect(st.conn)
}

func (h *hook) stopAll() {
	h.mu.Lock()
	cls := make([]*mqtt.Client, 0, len(h.conns))
	for cl := range h.conns {
		cls = append(cls, cl)
	}
	h.mu.Unlock()
	for _, cl := range cls {
		h.detach(cl)
	}
}

func (h *hook) OnDisconnect(cl *mqtt.Client, err error, expire bool) {
	if errors.Is(err, packets.ErrTopicAliasInvalid) {
		// Past maxTopicAliases (or alias 0): mochi closed it, 0x94.
		h.g.metrics.refusedAliases.Add(1)
	}
	if _, ours := h.qos2Cut.LoadAndDelete(cl); !ours && errors.Is(err, packets.ErrReceiveMaximum) {
		// mochi's own receive quota, within the connection: a QoS 1 or 2
		// publish past the Receive Maximum announced (MQTT-3.3.4-9).
		h.g.metrics.refusedRecvMax.Add(1)
		if held, ok := h.g.refusedLog.Allow(cl.ID + "\x00rm"); ok {
			h.g.log.Info("mqtt client past its receive maximum of unacknowledged publishes; disconnected with 0x93",
				slog.String("client", cl.ID), slog.Int("receive_maximum", int(h.g.receiveMaximum())), slog.Int64("suppressed", held))
		}
	}
	h.pending.Delete(cl)
	h.willProps.Delete(cl)
	h.willDone.Delete(cl)
	h.gone(cl)
	h.detach(cl)
	// mochi resends its own in-flight copies to a resumed session; the
	// Petrel subscription redelivers them instead.
	h.g.clearOutbound(cl)
	if expire && !cl.IsTakenOver() {
		if err := h.g.store.dropSession(h.g.ctx, cl.ID); err != nil {
			h.g.log.Warn("mqtt session not dropped", slog.String("client", cl.ID), slog.Any("error", err))
		}
		h.g.qos2Forget(cl.ID)
	}
}

func (h *hook) OnClientExpired(cl *mqtt.Client) {
	h.g.endWill(cl.ID, true) // the session ended before the will's delay
	for _, sub := range cl.State.Subscriptions.GetAll() {
		h.dropDurable(cl.ID, sub.Filter)
	}
	if err := h.g.store.dropSession(h.g.ctx, cl.ID); err != nil {
		h.g.log.Warn("mqtt session not dropped", slog.String("client", cl.ID), slog.Any("error", err))
	}
	h.g.qos2Forget(cl.ID)
}

func (h *hook) dropDurable(clientID, filter string) {
	if _, _, shared, _ := splitShared(filter); shared {
		h.g.leaveShare(clientID, filter)
	} else if err := h.g.be.Unsubscribe(h.g.ctx, durableName(clientID, filter)); err != nil && !errors.Is(err, context.Canceled) {
		h.g.log.Debug("mqtt durable subscription not deleted", slog.String("client", clientID), slog.String("filter", filter), slog.Any("error", err))
	}
	if err := h.g.store.dropSubscription(h.g.ctx, clientID, filter); err != nil {
		h.g.log.Warn("mqtt subscription not dropped", slog.String("client", clientID), slog.Any("error", err))
	}
}

// OnACLCheck decides subscriptions (write false: a filter, or the topic
// of a retained message delivered to one). Publishes are decided in
// OnPublish, which answers with a reason code.
func (h *hook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if write {
		return true
	}
	if isSys(topic) {
		st := h.conn(cl)
		return st != nil && h.g.be.AuthorizeSys(st.conn) == nil
	}
	pattern, err := petrelFilter(topic)
	if err != nil {
		return false
	}
	st := h.conn(cl)
	if st == nil {
		return false
	}
	return h.g.be.AuthorizeSubscribe(st.conn, pattern) == nil
}

func (h *hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	st := h.conn(cl)
	// mochi sends the retained messages once this returns: those
	// published before this subscription are in the index by then.
	_ = h.g.retainer.barrier(h.g.ctx)
	for i, sub := range pk.Filters {
		if i < len(codes) && codes[i] == CodeNotAuthorized && badFilter(sub.Filter) {
			// mochi takes "a+", "a#" and "$share//a" for valid filters;
			// MQTT-4.7.1 and MQTT-4.8.2-1 do not, and say so with 0x8F.
			codes[i] = CodeFilterInvalid
		}
		if i >= len(codes) || codes[i] >= CodeUnspecified {
			continue
		}
		var err error
		if st == nil {
			err = ErrClosed
		} else if err = st.subscribe(sub, persistent(cl), true); err == nil {
			// Judged again once its pump is registered: a reload that
			// ran since OnACLCheck judged it did not see it (Rejudge).
			if aerr := h.authorizeFilter(st.conn, sub.Filter); aerr != nil {
				h.dropFilter(st, sub.Filter)
				err = &Refusal{Code: CodeNotAuthorized, Reason: aerr.Error()}
			}
		}
		if err != nil {
			h.g.log.Info("mqtt subscription refused", slog.String("client", cl.ID), slog.String("filter", sub.Filter), slog.Any("error", err))
			codes[i] = CodeUnspecified
			var r *Refusal
			switch {
			case errors.Is(err, errTooManySubscriptions):
				h.g.metrics.refusedSubs.Add(1)
				if cl.Properties.ProtocolVersion >= 5 {
					codes[i] = CodeQuotaExceeded
				}
			case errors.As(err, &r) && cl.Properties.ProtocolVersion >= 5:
				// The node's own reason code (quota exceeded past
				// max_auto_queues); MQTT 3.1.1 has only 0x80.
				codes[i] = r.Code
			}
			cl.State.Subscriptions.Delete(sub.Filter)
			h.g.srv.Topics.Unsubscribe(sub.Filter, cl.ID)
			continue
		}
		if persistent(cl) {
			if err := h.g.store.saveSubscription(h.g.ctx, cl.ID, sub); err != nil {
				h.g.log.Warn("mqtt subscription not saved", slog.String("client", cl.ID), slog.Any("error", err))
			}
		}
	}
}

func (h *hook) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	st := h.conn(cl)
	for _, sub := range pk.Filters {
		if st != nil {
			st.unsubscribe(sub.Filter)
		}
		h.dropDurable(cl.ID, sub.Filter)
	}
}

func (h *hook) OnQosComplete(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != packets.Puback && pk.FixedHeader.Type != packets.Pubcomp {
		return // a PUBREL completes a publish from the client: OnPacketEncode
	}
	if st := h.conn(cl); st != nil {
		st.complete(pk.PacketID)
	}
}

func (h *hook) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Type == packets.Pubrel { // a PUBREL with a failure code
		h.qos2Released(cl, pk.PacketID)
		return
	}
	if st := h.conn(cl); st != nil {
		st.dropped(pk.PacketID)
	}
}

func (h *hook) OnRetainedExpired(topic string) {
	// mochi took it out of its index.
	h.g.sizeRetained(topic, 0)
	h.g.retainedChanged()
	if err := h.g.store.deleteRetained(h.g.ctx, topic); err != nil {
		h.g.log.Warn("mqtt expired retained message not deleted", slog.String("topic", topic), slog.Any("error", err))
	}
}

func (h *hook) StoredClients() ([]storage.Client, error) { return h.g.store.sessions(h.g.ctx) }

func (h *hook) StoredSubscriptions() ([]storage.Subscription, error) {
	return h.g.store.subscriptions(h.g.ctx)
}

// StoredRetainedMessages also sets mochi's figure of the retained
// messages to those it is given (see retainedChanged): mochi loads them
// without counting them, and publishes its $SYS figures once they are
// loaded.
func (h *hook) StoredRetainedMessages() ([]storage.Message, error) {
	msgs, err := h.g.store.retained(h.g.ctx)
	n := 0
	for _, m := range msgs {
		if !strings.HasPrefix(m.TopicName, "$") && len(m.Payload) > 0 {
			n++
			// Those kept before a lower bound are loaded all the same;
			// new ones are refused until the bytes are under it.
			h.g.sizeRetained(m.TopicName, retainedSize(m.TopicName, m.Payload))
		}
	}
	atomic.StoreInt64(&h.g.srv.Info.Retained, int64(n))
	return msgs, err
}
