package receiver

import (
	"context"
	"log/slog"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// Interceptor is the optional part of a Router that sees connections and
// whole messages on their way in and out: the node's application hooks.
// The receiver asks Intercepting once, in New: when it is false (or the
// Router lacks the interface) it never calls the other methods, and never
// decodes more of a message than routing needs.
//
// Every method is called from many goroutines at once.
type Interceptor interface {
	// Intercepting reports whether the methods below do anything.
	Intercepting() bool
	// Connected is called once peer proved its identity. An error closes
	// the connection before any session opens.
	Connected(ctx context.Context, peer session.Peer) error
	// Disconnected is called when a connection that Connected accepted
	// ended, after its sessions.
	Disconnected(peer session.Peer)
	// Publish sees each message of a link (client false) or a client's
	// publish session (client true) before it is routed. It may change
	// m, which is then stored as changed if it is still valid (a change
	// that makes it invalid refuses it). An error refuses the message
	// for good, with the error's text as the reason.
	Publish(ctx context.Context, peer session.Peer, m *message.Message, client bool) error
	// Deliver sees each message pushed to a client's subscription of
	// addr; it may change m, the copy pushed.
	Deliver(ctx context.Context, peer session.Peer, addr string, m *message.Message)
	// Settled is told of each ack or nack (reject included) the store
	// took from a client's subscription; m carries the header only.
	Settled(peer session.Peer, addr string, m *message.Message, op session.SettleOp, reason string)
	// Unsubscribed is called when a subscription that ClientSubscribe
	// accepted ends.
	Unsubscribed(peer session.Peer, addr string)
}

// interceptorOf returns r's Interceptor if it intercepts anything.
func interceptorOf(r Router) Interceptor {
	if ic, ok := r.(Interceptor); ok && ic.Intercepting() {
		return ic
	}
	return nil
}

// connected tells the interceptor about c; false if it refused c.
func (s *Server) connected(ctx context.Context, c *session.Conn) bool {
	if s.icpt == nil {
		return true
	}
	if err := s.icpt.Connected(ctx, c.Peer()); err != nil {
		s.log.Warn("connection refused by an interceptor", slog.String(logkey.Peer, c.Peer().Name),
			slog.String(logkey.Addr, c.Peer().Addr), slog.Any(logkey.Error, err))
		return false
	}
	return true
}

func (s *Server) disconnected(c *session.Conn) {
	if s.icpt != nil {
		s.icpt.Disconnected(c.Peer())
	}
}

// interceptPublish hands the whole message in data to the interceptor,
// and returns the header and encoding to route and store: re-encoded, as
// the interceptor may have changed it. A refusal comes back as a reason;
// an error (ctx ended meanwhile) is transient.
func (s *Server) interceptPublish(ctx context.Context, peer session.Peer, data []byte, client bool) (*message.Message, []byte, string, error) {
	full, err := message.Decode(data, s.cfg.Limits)
	if err != nil {
		s.stats.Refused.Add(1)
		return nil, nil, "bad message: " + err.Error(), nil
	}
	if err := s.icpt.Publish(ctx, peer, full, client); err != nil {
		if ctx.Err() != nil {
			return nil, nil, "", ctx.Err()
		}
		s.stats.Refused.Add(1)
		return nil, nil, err.Error(), nil
	}
	// The changed message is checked as the node's own Producer checks
	// one (Validate: priority, TTL, property keys, limits), and its
	// encoding as a received one (Peek), which the store decodes later.
	err = full.Validate(s.cfg.Limits)
	var out []byte
	if err == nil {
		out, err = full.MarshalBinary()
	}
	if err == nil {
		_, err = message.Peek(out, s.cfg.Limits)
	}
	if err != nil {
		s.stats.Refused.Add(1)
		return nil, nil, s.invalidAfter(data, err), nil
	}
	return full, out, "", nil
}

// ReasonIntercepted begins the reason a message is refused with when an
// interceptor's change made it invalid; the problem follows.
const ReasonIntercepted = "bad message: an interceptor's change made it invalid: "

// invalidAfter is the reason for a message the interceptors handed back
// invalid (err): one that came in as data was valid, and the change made
// it invalid. A message that came in invalid already (the wire's checks
// are fewer than Validate's: a negative TTL, an empty property key) is a
// bad message of its sender's. Only a refusal pays for the second look.
func (s *Server) invalidAfter(data []byte, err error) string {
	if in, derr := message.Decode(data, s.cfg.Limits); derr == nil {
		if verr := in.Validate(s.cfg.Limits); verr != nil {
			return "bad message: " + verr.Error()
		}
	}
	return ReasonIntercepted + err.Error()
}

// interceptDeliver returns data as the interceptor made it for peer; data
// itself if it cannot be decoded or re-encoded.
func (s *Server) interceptDeliver(ctx context.Context, peer session.Peer, addr string, data []byte) []byte {
	m, err := message.Decode(data, s.cfg.Limits)
	if err != nil {
		return data
	}
	s.icpt.Deliver(ctx, peer, addr, m)
	out, err := m.MarshalBinary()
	if err != nil {
		return data
	}
	return out
}

// settled tells the interceptor about the acks, nacks and rejects of a
// client's settle that the store took.
func (sub *subscription) settled(st session.Settle, ds []*queue.Delivery) {
	if sub.s.icpt == nil || st.Op == session.SettleRelease {
		return
	}
	for _, d := range ds {
		if m, err := message.Peek(d.Data, sub.s.cfg.Limits); err == nil {
			sub.s.icpt.Settled(sub.peer, sub.q.Name(), m, st.Op, st.Reason)
		}
	}
}

// unsubscribed tells the interceptor that peer's subscription of q ended;
// q is nil for a publish session.
func (s *Server) unsubscribed(peer session.Peer, q *queue.Queue) {
	if s.icpt != nil && q != nil {
		s.icpt.Unsubscribed(peer, q.Name())
	}
}

// interceptFile hands a file session's announcement m, decoded from
// data, to the interceptor, and checks what it handed back as
// interceptPublish does; a refusal comes back as a reason, and an error
// is transient.
func (s *Server) interceptFile(ctx context.Context, peer session.Peer, m *message.Message, data []byte) (string, error) {
	if s.icpt == nil {
		return "", nil
	}
	if err := s.icpt.Publish(ctx, peer, m, false); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return err.Error(), nil // counted in FilesRefused by the caller
	}
	if err := m.Validate(s.cfg.Limits); err != nil {
		return s.invalidAfter(data, err), nil
	}
	return "", nil
}
