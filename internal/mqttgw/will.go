package mqttgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Will messages, and the MQTT 5 Will Delay Interval (3.1.3.2).
//
// A will goes through the node like a publish of its client. Without a
// delay it goes when the connection is lost. With one, it waits for the
// delay or the end of the session, whichever comes first
// (MQTT-3.1.3-9): a new connection to the session before then discards
// it, a clean start (which ends the old session) or the session's expiry
// sends it at once. A session that ends with its connection (clean
// session, session expiry 0) sends it at once.
//
// mochi keeps delayed wills itself, but in memory only, routes them
// itself (a hook hears of it only while the session exists) and discards
// them on any new connection, a clean start too. So the gateway keeps
// them: in wills, and in mqtt.db, so that a node restart within the delay
// neither loses nor hastens one (mochi is handed a will it cannot
// deliver, see OnWill). They are bounded by the sessions (one per client
// id, persistent sessions only), and counted in Stats.WillsDelayed.
type wills struct {
	mu      sync.Mutex
	pending map[string]*delayedWill // by client id
	// latest is the newest connection of each client id, from the start
	// of its session's establishment to its disconnect: a will from an
	// older one comes from a connection taken over.
	latest map[string]latestConn
	wake   chan struct{}
}

type latestConn struct {
	cl    *mqtt.Client
	clean bool
}

// delayedWill is a will waiting for its time.
type delayedWill struct {
	clientID string
	due      time.Time
	conn     Conn
	pk       packets.Packet
}

func newWills() *wills {
	return &wills{pending: map[string]*delayedWill{}, latest: map[string]latestConn{}, wake: make(chan struct{}, 1)}
}

// connectWill is the will of a CONNECT: as mochi keeps it, and its
// properties.
type connectWill struct {
	will  mqtt.Will
	props packets.Properties
}

func newConnectWill(pk packets.Packet) connectWill {
	c := pk.Connect
	return connectWill{
		will: mqtt.Will{Payload: c.WillPayload, User: c.WillProperties.User, TopicName: c.WillTopic, Flag: 1,
			WillDelayInterval: c.WillProperties.WillDelayInterval, Qos: c.WillQos, Retain: c.WillRetain},
		props: c.WillProperties,
	}
}

// willPacket is cl's will as a publish. mochi keeps only the user
// properties of a will; the others come from the CONNECT (willProps).
func (h *hook) willPacket(cl *mqtt.Client, will mqtt.Will) packets.Packet {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: will.Qos, Retain: will.Retain},
		TopicName:       will.TopicName,
		Payload:         will.Payload,
		Properties:      packets.Properties{User: will.User},
		Origin:          cl.ID,
		Created:         time.Now().Unix(),
		ProtocolVersion: cl.Properties.ProtocolVersion,
	}
	if v, ok := h.willProps.Load(cl); ok {
		wp := v.(connectWill).props
		pk.Properties.PayloadFormat, pk.Properties.PayloadFormatFlag = wp.PayloadFormat, wp.PayloadFormatFlag
		pk.Properties.MessageExpiryInterval = wp.MessageExpiryInterval
		pk.Properties.ContentType = wp.ContentType
		pk.Properties.ResponseTopic = wp.ResponseTopic
		pk.Properties.CorrelationData = wp.CorrelationData
	}
	return pk
}

// OnWill publishes a client's will through the node, or keeps it for its
// delay, and hands mochi a will it cannot deliver (a '$' topic, which no
// client may subscribe to here), with no delay of its own: every delivery
// comes from Petrel.
func (h *hook) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	sink := mqtt.Will{TopicName: willSink, Flag: will.Flag}
	cl.Properties.Will.WillDelayInterval = 0 // mochi's delayed will would be a second copy of ours
	if _, done := h.willDone.LoadOrStore(cl, struct{}{}); !done {
		h.handleWill(cl, will)
	}
	return sink, nil
}

// willsAtClose settles the will of every connected client, as the node
// closes their connections (3.1.2.5: the server closing the connection
// without a DISCONNECT from the client publishes the will, or starts its
// delay). mochi would too, but not always: a connection whose read
// loop sees it closed before the read fails ends as if disconnected
// cleanly.
func (h *hook) willsAtClose() {
	for _, cl := range h.g.srv.Clients.GetAll() {
		v, ok := h.willProps.Load(cl)
		if !ok || cl.Closed() {
			continue // no will (or discarded by a DISCONNECT), or gone
		}
		if _, done := h.willDone.LoadOrStore(cl, struct{}{}); !done {
			h.handleWill(cl, v.(connectWill).will)
		}
	}
}

// takenOverWill settles the will of a connection a new one of its client
// id takes over (MQTT-3.1.4-3): the node closes it without a DISCONNECT
// from its client, so the will goes (3.1.2.5), unless it has a delay and
// the new connection continues the session (MQTT-3.1.3-9). mochi would
// too, but not always (see willsAtClose).
func (h *hook) takenOverWill(old *mqtt.Client) {
	v, ok := h.willProps.Load(old)
	if !ok || old.Closed() {
		return
	}
	if _, done := h.willDone.LoadOrStore(old, struct{}{}); !done {
		h.handleWill(old, v.(connectWill).will)
	}
}

// handleWill publishes cl's will, or keeps it for its delay.
func (h *hook) handleWill(cl *mqtt.Client, will mqtt.Will) {
	c := Conn{ClientID: cl.ID, Remote: cl.Net.Remote}
	if v, ok := h.pending.Load(cl); ok {
		c = v.(Conn)
	}
	pk := h.willPacket(cl, will)
	delay := h.g.willDelay(cl, will)

	// The check of a newer connection and the keeping of the will are
	// one step under w.mu, so that a connection establishing meanwhile
	// either finds the will to settle or is seen here.
	w := h.g.wills
	w.mu.Lock()
	lc, newer := w.latest[cl.ID]
	newer = newer && lc.cl != cl
	if delay > 0 && !newer {
		dw := &delayedWill{clientID: cl.ID, due: time.Now().Add(delay), conn: c, pk: pk}
		err := h.g.store.saveWill(h.g.ctx, dw)
		if err == nil {
			w.pending[cl.ID] = dw
		}
		w.mu.Unlock()
		if err == nil {
			h.g.wakeWills()
			return
		}
		h.g.log.Warn("mqtt will not kept for its delay: published now", slog.String("client", cl.ID), slog.Any("error", err))
	} else {
		w.mu.Unlock()
	}
	if newer && delay > 0 && !lc.clean {
		// The session has a new connection already (this one was taken
		// over), within the delay: MQTT-3.1.3-9.
		h.g.metrics.willsCancelled.Add(1)
		return
	}
	_ = h.g.sendWill(c, pk)
}

// willDelay is how long cl's will waits: its Will Delay Interval, within
// its session's expiry; 0 for a session that ends with its connection.
func (g *Gateway) willDelay(cl *mqtt.Client, will mqtt.Will) time.Duration {
	if cl.Properties.ProtocolVersion < 5 || will.WillDelayInterval == 0 || !persistent(cl) {
		return 0
	}
	d := time.Duration(will.WillDelayInterval) * time.Second
	if exp := time.Duration(cl.Properties.Props.SessionExpiryInterval) * time.Second; exp < d {
		d = exp
	}
	return min(d, g.cfg.MaxSessionExpiry)
}

// sendWill publishes a will through the node. A refused will is logged
// and dropped; the error is for the caller to keep it when the gateway is
// closing.
func (g *Gateway) sendWill(c Conn, pk packets.Packet) error {
	pk.Created = time.Now().Unix() // its expiry counts from now (3.1.3.2.4)
	if err := g.publish(c, pk, nil, ""); err != nil {
		if g.ctx.Err() == nil {
			g.log.Warn("mqtt will refused", slog.String("client", c.ClientID), slog.String("topic", clip(pk.TopicName)), slog.Any("error", err))
		}
		return err
	}
	g.metrics.published[min(pk.FixedHeader.Qos, 2)].Add(1)
	g.metrics.willsSent.Add(1)
	return nil
}

func (g *Gateway) wakeWills() {
	select {
	case g.wills.wake <- struct{}{}:
	default:
	}
}

// establishing records cl as the newest connection of its client id, and
// settles the will its session has waiting: a new connection to the
// session discards it (MQTT-3.1.3-9), a clean start ends the session
// and sends it.
func (h *hook) establishing(cl *mqtt.Client, clean bool) {
	g := h.g
	g.wills.mu.Lock()
	g.wills.latest[cl.ID] = latestConn{cl: cl, clean: clean}
	w := g.wills.pending[cl.ID]
	delete(g.wills.pending, cl.ID)
	g.wills.mu.Unlock()
	if w != nil {
		g.settleWill(w, clean)
	}
}

// gone forgets cl as the newest connection of its client id.
func (h *hook) gone(cl *mqtt.Client) {
	w := h.g.wills
	w.mu.Lock()
	if w.latest[cl.ID].cl == cl {
		delete(w.latest, cl.ID)
	}
	w.mu.Unlock()
}

// endWill settles the will clientID's session had waiting for its delay,
// if any: sent (send) when the session ended (expired) before the delay,
// discarded when its identity was revoked.
func (g *Gateway) endWill(clientID string, send bool) {
	g.wills.mu.Lock()
	w := g.wills.pending[clientID]
	delete(g.wills.pending, clientID)
	g.wills.mu.Unlock()
	if w != nil {
		g.settleWill(w, send)
	}
}

// settleWill sends w, or discards it, and forgets it; one the gateway's
// closing kept from being sent stays in mqtt.db for the next run.
func (g *Gateway) settleWill(w *delayedWill, send bool) {
	if send {
		if err := g.sendWill(w.conn, w.pk); err != nil && g.ctx.Err() != nil {
			return
		}
	} else {
		g.metrics.willsCancelled.Add(1)
	}
	if err := g.store.dropWill(g.ctx, w.clientID, w.due); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("mqtt will not dropped", slog.String("client", w.clientID), slog.Any("error", err))
	}
}

// willLoop sends each delayed will at its time, until the gateway
// closes. What is still waiting then stays in mqtt.db, for the next run.
func (g *Gateway) willLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		var due []*delayedWill
		next := now.Add(time.Hour)
		g.wills.mu.Lock()
		for id, w := range g.wills.pending {
			if !w.due.After(now) {
				due = append(due, w)
				delete(g.wills.pending, id)
			} else if w.due.Before(next) {
				next = w.due
			}
		}
		g.wills.mu.Unlock()
		for _, w := range due {
			g.settleWill(w, true)
		}
		t.Reset(time.Until(next))
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		case <-g.wills.wake:
		}
	}
}

// loadWills takes back the wills a previous run left waiting.
func (g *Gateway) loadWills() error {
	ws, err := g.store.wills(g.ctx)
	if err != nil {
		return err
	}
	g.wills.mu.Lock()
	defer g.wills.mu.Unlock()
	for _, w := range ws {
		g.wills.pending[w.clientID] = w
	}
	return nil
}

func (s *sessionStore) saveWill(ctx context.Context, w *delayedWill) error {
	b, err := encodePacket(w.pk)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO wills (client_id, due_ms, identity, remote, packet) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET due_ms = excluded.due_ms, identity = excluded.identity,
		remote = excluded.remote, packet = excluded.packet`,
		w.clientID, w.due.UnixMilli(), w.conn.Identity, w.conn.Remote, b)
	return err
}

// dropWill deletes the will of clientID due at due (a newer one, of a
// later connection, stays).
func (s *sessionStore) dropWill(ctx context.Context, clientID string, due time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM wills WHERE client_id = ? AND due_ms = ?`, clientID, due.UnixMilli())
	return err
}

func (s *sessionStore) wills(ctx context.Context) ([]*delayedWill, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client_id, due_ms, identity, remote, packet FROM wills`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*delayedWill
	for rows.Next() {
		var (
			id, identity, remote string
			due                  int64
			b                    []byte
			m                    storage.Message
		)
		if err := rows.Scan(&id, &due, &identity, &remote, &b); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("mqtt will of %q: %w", id, err)
		}
		out = append(out, &delayedWill{clientID: id, due: time.UnixMilli(due),
			conn: Conn{Identity: identity, ClientID: id, Remote: remote}, pk: m.ToPacket()})
		out[len(out)-1].pk.ProtocolVersion = 5 // only MQTT 5 has a will delay
	}
	return out, rows.Err()
}
