package mqttgw

import (
	"errors"
	"fmt"
	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Rejudging: the node's identities and access rules change while clients
// are connected. A connection's identity is proved at CONNECT and each
// filter judged at SUBSCRIBE; a change that takes either away must not
// wait for the client to reconnect, or a revoked client would go on
// receiving for as long as its connection lives. So Rejudge, called after
// each change, judges every connected client again: one whose identity
// is no longer admitted, or that holds a filter it may no longer hold, is
// disconnected (MQTT 5: DISCONNECT 0x87 with the reason; 3.1.1 has no
// DISCONNECT from the server, so its connection is closed), since MQTT
// has no other way to tell a client its subscription ended. The revoked
// filters are removed from its session first, so that a persistent
// session resumes without them; the filters it may still hold keep their
// durable subscriptions, and what was in flight on them goes back to be
// delivered again, as at any end of a connection.
//
// A persistent session outlives its connection: while its client is
// away, its filters' durable Petrel subscriptions go on collecting what
// is published, until the session expires (days, by default). A reload
// that removes its identity from peers drops such a session at once, as
// if it expired, whether its client was connected (and is cut) or away:
// no one can resume it, and what it would collect until it expires is
// taken from the store for no one. Its subscriptions are deleted with
// what they held, and its will is discarded. A session away that lost
// the right to a filter has that filter removed, with its subscription,
// at the reload rather than at its next connection (resume).
//
// Nothing is judged per delivery: a revoked filter's pump is cancelled
// at once, before Rejudge returns, so nothing published after the change
// goes out on it. A connection or filter admitted while Rejudge ran,
// under the rules it replaced, is judged again once registered (resume,
// OnSubscribed).

// Rejudge judges every connected client again under the Backend's current
// identities and rules (Backend.Admitted, AuthorizeSubscribe,
// AuthorizeSys). It does not wait for the clients it disconnects.
func (g *Gateway) Rejudge() {
	for _, st := range g.hook.connected() {
		g.hook.rejudge(st)
	}
	g.hook.rejudgeAway()
}

// rejudgeAway judges the persistent sessions whose clients are away, in
// a goroutine, as reading their owners and deleting subscriptions must
// not hold up the reload: a session whose owner is no longer admitted is
// dropped (dropSession), and the filters it may no longer hold are
// removed. A session stored before sessions had an owner is judged when
// it resumes.
func (h *hook) rejudgeAway() {
	var away []*mqtt.Client
	for _, cl := range h.g.srv.Clients.GetAll() {
		if persistent(cl) && cl.Closed() && h.conn(cl) == nil {
			away = append(away, cl)
		}
	}
	if len(away) == 0 || h.g.ctx.Err() != nil {
		return
	}
	h.g.wg.Add(1)
	go func() {
		defer h.g.wg.Done()
		owners, err := h.g.store.owners(h.g.ctx)
		if err != nil {
			h.g.log.Warn("mqtt sessions away not judged again: their owners not read", slog.Any("error", err))
			return
		}
		dropped := 0
		for _, cl := range away {
			owner := owners[cl.ID]
			if owner == "" {
				continue
			}
			c := Conn{Identity: owner, ClientID: cl.ID}
			if err := h.g.be.Admitted(c); err != nil {
				if h.dropSession(cl, owner, err) {
					dropped++
				}
				continue
			}
			for _, sub := range cl.State.Subscriptions.GetAll() {
				if err := h.authorizeFilter(c, sub.Filter); err != nil {
					h.g.log.Warn("mqtt session filter removed: its right was revoked", slog.String("client", cl.ID),
						slog.String("identity", owner), slog.String("filter", sub.Filter), slog.Any("error", err))
					cl.State.Subscriptions.Delete(sub.Filter)
					h.g.srv.Topics.Unsubscribe(sub.Filter, cl.ID)
					h.dropDurable(cl.ID, sub.Filter)
				}
			}
		}
		if dropped > 0 {
			h.g.log.Warn("mqtt persistent sessions dropped: their identities were revoked", slog.Int("sessions", dropped))
		}
	}()
}

// dropSession drops cl's persistent session, whose owner identity was
// revoked (why), as if it expired: mochi forgets it, its filters'
// durable subscriptions are deleted with what they held, its will is
// discarded, and mqtt.db forgets it. It reports whether it did: not if
// another connection holds the client id by now.
func (h *hook) dropSession(cl *mqtt.Client, identity string, why error) bool {
	if cur, ok := h.g.srv.Clients.Get(cl.ID); !ok || cur != cl {
		return false
	}
	h.g.srv.Clients.Delete(cl.ID)
	h.g.endWill(cl.ID, false) // its identity was revoked: it may publish nothing more
	subs := cl.State.Subscriptions.GetAll()
	for _, sub := range subs {
		h.dropDurable(cl.ID, sub.Filter)
		cl.State.Subscriptions.Delete(sub.Filter)
		h.g.srv.Topics.Unsubscribe(sub.Filter, cl.ID)
	}
	if err := h.g.store.dropSession(h.g.ctx, cl.ID); err != nil {
		h.g.log.Warn("mqtt session not dropped", slog.String("client", cl.ID), slog.Any("error", err))
	}
	h.g.qos2Forget(cl.ID)
	h.g.log.Warn("mqtt persistent session dropped: its identity was revoked", slog.String("client", cl.ID),
		slog.String("identity", identity), slog.Int("subscriptions", len(subs)), slog.Any("error", why))
	return true
}

// connected returns the connections that have deliveries.
func (h *hook) connected() []*connState {
	h.mu.Lock()
	defer h.mu.Unlock()
	sts := make([]*connState, 0, len(h.conns))
	for _, st := range h.conns {
		sts = append(sts, st)
	}
	return sts
}

// rejudge judges st's client again; one that lost its identity or a
// filter is cut (see cut).
func (h *hook) rejudge(st *connState) {
	if err := h.g.be.Admitted(st.conn); err != nil {
		st.cancel() // no delivery more, before the DISCONNECT goes
		h.cut(st, nil, err)
		return
	}
	var revoked []string
	var why []error
	for _, f := range st.filters() {
		if err := h.authorizeFilter(st.conn, f); err != nil {
			st.halt(f)
			revoked = append(revoked, f)
			why = append(why, fmt.Errorf("filter %q: %w", f, err))
		}
	}
	if len(revoked) > 0 {
		h.cut(st, revoked, errors.Join(why...))
	}
}

// authorizeFilter judges an MQTT filter for c, as OnACLCheck does.
func (h *hook) authorizeFilter(c Conn, filter string) error {
	if isSys(filter) {
		return h.g.be.AuthorizeSys(c)
	}
	pattern, err := petrelFilter(filter)
	if err != nil {
		return err
	}
	return h.g.be.AuthorizeSubscribe(c, pattern)
}

// cut disconnects st's client, whose access was revoked (why), and
// removes the filters it lost from its session, in a goroutine: a
// DISCONNECT written to a client that does not read, or a pump stopping,
// must not hold up the reload. The client is disconnected first, so that
// its pumps' writes end with it; a reconnect that comes before the
// filters are removed finds them judged at resume.
func (h *hook) cut(st *connState, revoked []string, why error) {
	cl := st.cl
	if h.g.ctx.Err() != nil {
		return // closing: Close disconnects every client
	}
	h.g.wg.Add(1)
	go func() {
		defer h.g.wg.Done()
		h.g.log.Warn("mqtt client disconnected: its access was revoked", slog.String("client", cl.ID),
			slog.String("identity", st.conn.Identity), slog.Any("error", why))
		disconnectRevoked(h.g.srv, cl, why)
		for _, f := range revoked {
			h.dropFilter(st, f)
		}
		// Judged without its proof: an identity whose secret changed
		// keeps its session, to resume with the new secret; one removed
		// loses it.
		owner := Conn{Identity: st.conn.Identity, ClientID: cl.ID}
		if revoked == nil && persistent(cl) && h.g.be.Admitted(owner) != nil {
			h.dropSession(cl, owner.Identity, why)
		}
	}()
}

// disconnectRevoked tells cl why it is disconnected: DISCONNECT 0x87 with
// the reason for MQTT 5; MQTT 3.1.1 only loses its connection.
func disconnectRevoked(srv *mqtt.Server, cl *mqtt.Client, why error) {
	if cl.Properties.ProtocolVersion < 5 {
		cl.Stop(fmt.Errorf("access revoked: %w", why))
		return
	}
	_ = srv.DisconnectClient(cl, packets.Code{Code: packets.ErrNotAuthorized.Code, Reason: why.Error()})
}

// dropFilter removes filter from cl's session, here and in mqtt.db, with
// its durable subscription, as an UNSUBSCRIBE would.
func (h *hook) dropFilter(st *connState, filter string) {
	st.unsubscribe(filter)
	st.cl.State.Subscriptions.Delete(filter)
	h.g.srv.Topics.Unsubscribe(filter, st.cl.ID)
	h.dropDurable(st.cl.ID, filter)
}

// resume joins the filters of a resumed session (taken over, or loaded
// at start), each judged first under the rules in force: a filter revoked
// while the client was away is removed, and the client is told as a
// connected one would be. Its identity is judged again too, and, once
// the filters run, all of them, for a reload that ran meanwhile.
func (h *hook) resume(st *connState) {
	cl := st.cl
	if err := h.g.be.Admitted(st.conn); err != nil {
		st.cancel()
		h.cut(st, nil, err)
		return
	}
	var revoked []string
	var why []error
	for _, sub := range cl.State.Subscriptions.GetAll() {
		if err := h.authorizeFilter(st.conn, sub.Filter); err != nil {
			revoked = append(revoked, sub.Filter)
			why = append(why, fmt.Errorf("filter %q: %w", sub.Filter, err))
			continue
		}
		// Not bounded: each was taken under the bound when it was made.
		if err := st.subscribe(sub, true, false); err != nil {
			h.g.log.Warn("mqtt session subscription not resumed", slog.String("client", cl.ID), slog.String("filter", sub.Filter), slog.Any("error", err))
		}
	}
	if len(revoked) > 0 {
		h.cut(st, revoked, errors.Join(why...))
		return
	}
	h.rejudge(st)
}

// filters returns the filters st delivers or mochi serves ($SYS); none
// once it stopped.
func (st *connState) filters() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped {
		return nil
	}
	fs := make([]string, 0, len(st.pumps)+len(st.sys))
	for f := range st.pumps {
		fs = append(fs, f)
	}
	for f := range st.sys {
		fs = append(fs, f)
	}
	return fs
}

// halt cancels filter's pump without waiting for it: it takes no
// delivery more. unsubscribe ends it.
func (st *connState) halt(filter string) {
	st.mu.Lock()
	p := st.pumps[filter]
	st.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}
