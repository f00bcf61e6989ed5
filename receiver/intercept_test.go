package receiver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// breakingRouter is localRouter with an interceptor that makes a message
// with the body "break" invalid (a negative TTL) and leaves the others.
type breakingRouter struct{ localRouter }

func (breakingRouter) Intercepting() bool                                                       { return true }
func (breakingRouter) Connected(context.Context, session.Peer) error                            { return nil }
func (breakingRouter) Disconnected(session.Peer)                                                {}
func (breakingRouter) Deliver(context.Context, session.Peer, string, *message.Message)          {}
func (breakingRouter) Settled(session.Peer, string, *message.Message, session.SettleOp, string) {}
func (breakingRouter) Unsubscribed(session.Peer, string)                                        {}

func (breakingRouter) Publish(_ context.Context, _ session.Peer, m *message.Message, _ bool) error {
	if string(m.Body) == "break" {
		m.TTL = -time.Second
	}
	return nil
}

// A message the interceptor made invalid is refused as the interceptor's
// doing; one that came in invalid already (the wire checks less than
// Validate) is refused as its sender's bad message, not blamed on the
// interceptor. Neither is stored.
func TestInterceptedInvalidRefusedAndBlamedRight(t *testing.T) {
	f := newFixtureRouted(t, func(q *queue.Queue) Router { return breakingRouter{localRouter{q}} })
	_, s := f.dial(t)
	send := func(seq uint64, m *message.Message) { t.Helper(); sendAs(t, s, seq, m) }
	send(1, &message.Message{Body: []byte("break")})
	send(2, &message.Message{Body: []byte("as it came"), TTL: -time.Second})
	send(3, &message.Message{Body: []byte("as it came"), Properties: message.Properties{{Key: "", Value: message.Int32(1)}}})
	send(4, &message.Message{Body: []byte("fine")})
	refused := refusedUntil(t, s, 4)
	if r := refused[1]; !strings.HasPrefix(r, ReasonIntercepted) || !strings.Contains(r, message.ErrTTL.Error()) {
		t.Errorf("made invalid by the interceptor: reason %q, want %q and why", r, ReasonIntercepted)
	}
	for seq, want := range map[uint64]error{2: message.ErrTTL, 3: message.ErrPropertyKey} {
		if r := refused[seq]; !strings.HasPrefix(r, "bad message: ") || strings.Contains(r, "interceptor") || !strings.Contains(r, want.Error()) {
			t.Errorf("came in invalid (%d): reason %q, want a bad message saying %q, not blamed on the interceptor", seq, r, want)
		}
	}
	if st := f.q.Stats(); st.Depth != 1 {
		t.Fatalf("the queue holds %d, want the valid message only", st.Depth)
	}
	if got := f.srv.StatsRef().Refused.Load(); got != 3 {
		t.Fatalf("refused counter %d, want 3", got)
	}
}

// TestInvalidMessageRefusedWithoutInterceptor: a peer that builds its
// messages by hand cannot store what the node's own Producer refuses,
// with no interceptor registered too: a negative TTL, an empty property
// key or one that is not UTF-8 is refused as a bad message, and the
// valid message after them is stored.
func TestInvalidMessageRefusedWithoutInterceptor(t *testing.T) {
	f := newFixture(t)
	_, s := f.dial(t)
	send := func(seq uint64, m *message.Message) { t.Helper(); sendAs(t, s, seq, m) }
	send(1, &message.Message{TTL: -time.Second})
	send(2, &message.Message{Properties: message.Properties{{Key: "", Value: message.Int32(1)}}})
	send(3, &message.Message{Properties: message.Properties{{Key: "\xff", Value: message.Int32(1)}}})
	send(4, &message.Message{Body: []byte("fine")})
	refused := refusedUntil(t, s, 4)
	for seq, want := range map[uint64]error{1: message.ErrTTL, 2: message.ErrPropertyKey, 3: message.ErrPropertyKey} {
		if r := refused[seq]; !strings.HasPrefix(r, "bad message: ") || !strings.Contains(r, want.Error()) {
			t.Errorf("message %d: reason %q, want a bad message saying %q", seq, r, want)
		}
	}
	if st := f.q.Stats(); st.Depth != 1 {
		t.Fatalf("the queue holds %d, want the valid message only", st.Depth)
	}
}

// sendAs sends m on s as message seq of node 1 to orders@b, encoded as
// it is, however invalid.
func sendAs(t *testing.T, s *session.Session, seq uint64, m *message.Message) {
	t.Helper()
	m.ID, m.Origin, m.Destination, m.Kind = seq, message.NodeID{1}, "orders@b", message.KindData
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendData(context.Background(), seq, b); err != nil {
		t.Fatal(err)
	}
}

// refusedUntil reads the acks of s until message last is acked, and
// returns the reasons of those refused meanwhile, by seq.
func refusedUntil(t *testing.T, s *session.Session, last uint64) map[uint64]string {
	t.Helper()
	refused := map[uint64]string{}
	for {
		a := nextAck(t, s)
		if a.Refused {
			refused[a.Seq] = a.Reason
			continue
		}
		if a.Seq == last {
			return refused
		}
	}
}
