package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// Clients are processes that are not nodes but produce and consume through
// this one, over the links' listener and handshake (see session/client.go
// for the wire). A publish session's messages are routed by their own
// destinations, as the node's Producer routes them; a subscribe session
// leases an address's messages and pushes them to the client.

// ErrDenied is wrapped by a ClientRouter's refusal that the access rules
// made: the client is told it was denied (session.FlagDenied), and the
// denial is counted in Stats.Denied.
var ErrDenied = errors.New("denied")

// ClientRouter is the part of a Router that serves clients. A Router
// without it refuses their sessions.
//
// peer is the identity the client proved in the connection's handshake.
// An error wrapping ErrDenied is a denial by the access rules, one
// wrapping ErrRefused a refusal for good; any other error is transient.
type ClientRouter interface {
	// ClientPublish returns the queue a message a client published goes
	// to, and its destination as stored: when that differs from
	// m.Destination (a bare name of a send address), the message is
	// stored with it.
	ClientPublish(ctx context.Context, peer session.Peer, m *message.Message) (*queue.Queue, string, error)
	// ClientSubscribe returns the receive queue of addr, which the client
	// consumes from.
	ClientSubscribe(ctx context.Context, peer session.Peer, addr string) (*queue.Queue, error)
	// ClientSubscribeTopic makes or joins the topic subscription sub of
	// pattern, and returns its queue, which the client consumes from, and
	// release, which the receiver calls once when the session ends: it
	// ends a non-durable subscription that no other consumer shares.
	ClientSubscribeTopic(ctx context.Context, peer session.Peer, pattern string, sub session.TopicSubscription) (q *queue.Queue, release func(), err error)
}

// serveClient accepts or refuses a client's publish or subscribe session,
// and starts serving it. done gives back the session's place among its
// identity's (identityCounts.takeSession): called once the session is
// refused, or once it ended.
func (s *Server) serveClient(c *session.Conn, sess *session.Session, sessions *sync.WaitGroup, done func()) {
	peer := c.Peer()
	cr, ok := s.router.(ClientRouter)
	var q *queue.Queue
	release := func() {}
	var err error
	// Read before the rules judge the session: a Rejudge meanwhile may
	// have judged every open one before this one registered.
	gen := s.rejudgeGen()
	topic, isTopic := sess.Topic()
	switch {
	case !ok:
		err = fmt.Errorf("%w: node %s serves no clients", ErrRefused, s.cfg.Session.Name)
	case isTopic:
		q, release, err = cr.ClientSubscribeTopic(s.ctx, peer, sess.Address(), topic)
	case sess.Subscribe():
		q, err = cr.ClientSubscribe(s.ctx, peer, sess.Address())
	}
	if err != nil {
		s.stats.SessionsRefused.Add(1)
		s.log.Warn("client session refused", slog.String(logkey.Peer, peer.Name), slog.String(logkey.Address, sess.Address()), slog.Any(logkey.Error, err))
		if errors.Is(err, ErrDenied) {
			s.stats.Denied.Add(1)
			sess.Deny(err.Error())
		} else {
			sess.Refuse(err.Error())
		}
		done()
		return
	}
	var sub *subscription
	if q != nil {
		sub = s.newSubscription(c, sess, q, gen)
	}
	if err := sess.Accept(s.cfg.Window); err != nil {
		if sub != nil {
			sub.abandon()
		}
		s.unsubscribed(peer, q)
		release()
		done()
		return
	}
	sessions.Add(1)
	go func() {
		defer sessions.Done()
		defer done()
		if sub != nil {
			sub.serve()
			s.unsubscribed(peer, q)
			release()
		} else {
			s.sessionLoop(c, sess)
		}
	}()
}

// publishPut checks one published message and routes it by its
// destination. The bytes are stored as they came unless the destination
// changes. A message refused for good, or denied, comes back as a
// refusal; any error is transient.
func (s *Server) publishPut(ctx context.Context, peer session.Peer, d session.Data) (queue.Put, refusal, error) {
	// PeekValid: a client that builds its messages by hand stores nothing
	// the node's own Producer would refuse.
	m, err := message.PeekValid(d.Message, s.cfg.Limits)
	if err != nil {
		s.stats.Refused.Add(1)
		return queue.Put{}, refusal{reason: "bad message: " + err.Error()}, nil
	}
	if reason := s.refuseKind(m); reason != "" {
		return queue.Put{}, refusal{reason: reason}, nil
	}
	if reason := s.checkOrigin(peer, m, true); reason != "" {
		s.stats.Refused.Add(1)
		return queue.Put{}, refusal{reason: reason}, nil
	}
	if s.icpt != nil {
		var reason string
		if m, d.Message, reason, err = s.interceptPublish(ctx, peer, d.Message, true); reason != "" || err != nil {
			return queue.Put{}, refusal{reason: reason}, err
		}
	}
	q, dest, err := s.router.(ClientRouter).ClientPublish(ctx, peer, m)
	switch {
	case errors.Is(err, ErrDenied):
		s.stats.Denied.Add(1)
		return queue.Put{}, refusal{reason: err.Error(), denied: true}, nil
	case errors.Is(err, ErrRefused):
		s.stats.Refused.Add(1)
		return queue.Put{}, refusal{reason: err.Error()}, nil
	case err != nil:
		return queue.Put{}, refusal{}, err
	}
	data := d.Message
	if dest != m.Destination {
		full, err := message.Decode(data, s.cfg.Limits)
		if err == nil {
			full.Destination = dest
			data, err = full.MarshalBinary()
		}
		if err != nil {
			s.stats.Refused.Add(1)
			return queue.Put{}, refusal{reason: "bad message: " + err.Error()}, nil
		}
		m.Destination = dest
	}
	return queue.Put{Queue: q, Msg: m, Data: data, Dedupe: true}, refusal{}, nil
}
