package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// localRouter receives everything into one queue, and refuses "nope".
type localRouter struct{ q *queue.Queue }

func (r localRouter) AcceptSession(session.Peer, string) error { return nil }
func (r localRouter) Inbound(_ context.Context, _ session.Peer, m *message.Message) (*queue.Queue, error) {
	if strings.HasPrefix(m.Destination, "nope") {
		return nil, fmt.Errorf("%w: no address nope here", ErrRefused)
	}
	return r.q, nil
}

type fixture struct {
	store *queue.Store
	q     *queue.Queue
	srv   *Server
}

func newFixture(t *testing.T, secret ...byte) *fixture {
	t.Helper()
	return newFixtureRouted(t, func(q *queue.Queue) Router { return localRouter{q} }, secret...)
}

// newFixtureRouted is newFixture with the router route makes of the
// fixture's queue.
func newFixtureRouted(t *testing.T, route func(*queue.Queue) Router, secret ...byte) *fixture {
	t.Helper()
	st, err := queue.Open(context.Background(), queue.Config{Path: filepath.Join(t.TempDir(), "petrel.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.Queue(context.Background(), "orders", queue.KindReceive)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Listen: "127.0.0.1:0", Window: 16, Logger: quiet,
		Session: session.Config{Name: "b", ID: message.NodeID{2}, Secret: secret, HandshakeTimeout: 2 * time.Second, Logger: quiet}}, st, route(q))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		st.Close()
	})
	return &fixture{store: st, q: q, srv: srv}
}

// connectAsA dials srv as node "a", on a connection of its own that is
// closed when the test ends.
func connectAsA(t *testing.T, srv *Server) *session.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := session.Client(ctx, nc, session.Config{Name: "a", ID: message.NodeID{1}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dial opens a session to the fixture as node "a".
func (f *fixture) dial(t *testing.T) (*session.Conn, *session.Session) {
	t.Helper()
	c := connectAsA(t, f.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.Open(ctx, "orders@b", 16)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func encoded(t *testing.T, id uint64, dest string) []byte {
	t.Helper()
	m := &message.Message{ID: id, Origin: message.NodeID{1}, Destination: dest, Kind: message.KindData, Priority: 4, Body: []byte(fmt.Sprint(id))}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendOrders sends messages from to to, each on the seq of its id, to
// orders@b.
func sendOrders(t *testing.T, s *session.Session, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		if err := s.SendData(context.Background(), seq, encoded(t, seq, "orders@b")); err != nil {
			t.Fatal(err)
		}
	}
}

// nextAck waits for the next ack or refusal.
func nextAck(t *testing.T, s *session.Session) session.Ack {
	t.Helper()
	select {
	case a, ok := <-s.Acks():
		if !ok {
			t.Fatalf("session ended: %v", s.Err())
		}
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no ack")
	}
	return session.Ack{}
}

func TestAcksAfterCommitAndDedupesResends(t *testing.T) {
	f := newFixture(t)
	_, s := f.dial(t)
	ctx := context.Background()
	sendOrders(t, s, 1, 3)
	var acked uint64
	for acked < 3 {
		a := nextAck(t, s)
		if a.Refused {
			t.Fatalf("refused: %s", a.Reason)
		}
		acked = a.Seq
	}
	// An ack means committed: the queue has them now.
	if st := f.q.Stats(); st.Depth != 3 {
		t.Fatalf("acked 3 but the queue holds %d", st.Depth)
	}
	// A new session after a "reconnect" resends 2 and 3: they are acked
	// and dropped.
	_, s2 := f.dial(t)
	s2.SendData(ctx, 1, encoded(t, 2, "orders@b"))
	s2.SendData(ctx, 2, encoded(t, 3, "orders@b"))
	s2.SendData(ctx, 3, encoded(t, 4, "orders@b"))
	for acked = 0; acked < 3; {
		acked = nextAck(t, s2).Seq
	}
	f.store.Sync(ctx)
	if st := f.q.Stats(); st.Depth != 4 || st.Deduped != 2 {
		t.Fatalf("after resends: %+v, want depth 4 and 2 deduped", st)
	}
}

func TestRefusesUnknownAddressAndBadMessage(t *testing.T) {
	f := newFixture(t)
	_, s := f.dial(t)
	ctx := context.Background()
	s.SendData(ctx, 1, encoded(t, 1, "nope@b"))
	s.SendData(ctx, 2, []byte{1, 2, 3}) // not a message
	s.SendData(ctx, 3, encoded(t, 3, "orders@b"))
	refused := map[uint64]string{}
	for {
		a := nextAck(t, s)
		if a.Refused {
			refused[a.Seq] = a.Reason
			continue
		}
		if a.Seq == 3 {
			break
		}
	}
	if !strings.Contains(refused[1], "nope") || !strings.Contains(refused[2], "bad message") || len(refused) != 2 {
		t.Fatalf("refusals: %v", refused)
	}
	if st := f.q.Stats(); st.Depth != 1 {
		t.Fatalf("queue holds %d, want only the good message", st.Depth)
	}
	if got := f.srv.StatsRef().Refused.Load(); got != 2 {
		t.Fatalf("refused counter %d", got)
	}
}

func TestSequenceGapOrReplayEndsSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []uint64
	}{
		{"replay", []uint64{1, 2, 2}},
		{"gap", []uint64{1, 3}},
		{"not from 1", []uint64{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, s := f.dial(t)
			for i, seq := range tc.seqs {
				s.SendData(context.Background(), seq, encoded(t, uint64(i+1), "orders@b"))
			}
			select {
			case <-s.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("session not ended")
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "sequence") {
				t.Fatalf("session error %v, want one naming the sequence", err)
			}
			if got := f.srv.StatsRef().ProtocolErrors.Load(); got == 0 {
				t.Fatal("protocol error not counted")
			}
		})
	}
}

func TestWrongSecretNeverTouchesQueues(t *testing.T) {
	f := newFixture(t, []byte("right")...)
	nc, err := net.Dial("tcp", f.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = session.Client(context.Background(), nc, session.Config{Name: "a", ID: message.NodeID{1}, Secret: []byte("wrong"), Logger: quiet})
	if !errors.Is(err, session.ErrAuth) {
		t.Fatalf("handshake with a wrong secret: %v", err)
	}
	petreltest.Eventually(t, "the authentication failure counted", func() bool { return f.srv.StatsRef().AuthFailed.Load() != 0 })
	if f.srv.StatsRef().AuthFailed.Load() != 1 {
		t.Fatal("auth failure not counted once")
	}
}

// TestIdleSessionHoldsNoAckLoop: once what a session sent is acked, the
// receiver holds no ack loop for it; what comes next, a refusal among it,
// starts one again and is acked in order, cumulatively past the last ack.
func TestIdleSessionHoldsNoAckLoop(t *testing.T) {
	f := newFixture(t)
	_, s := f.dial(t)
	ctx := context.Background()
	sendOrders(t, s, 1, 3)
	for acked := uint64(0); acked < 3; {
		acked = nextAck(t, s).Seq
	}
	petreltest.Eventually(t, "no ack loop while the session is idle", func() bool {
		return petreltest.GoroutinesIn("receiver.(*Server).ackLoop") == 0
	}, func() string { return fmt.Sprint(petreltest.GoroutinesIn("receiver.(*Server).ackLoop"), " ack loops") })
	if n := petreltest.GoroutinesIn("receiver.(*Server).readLoop"); n != 1 {
		t.Fatalf("%d read loops, want 1", n)
	}
	for _, p := range []struct {
		seq  uint64
		dest string
	}{{4, "orders@b"}, {5, "nope@b"}, {6, "orders@b"}} {
		if err := s.SendData(ctx, p.seq, encoded(t, p.seq, p.dest)); err != nil {
			t.Fatal(err)
		}
	}
	var refused []uint64
	for acked := uint64(0); acked < 6; {
		a := nextAck(t, s)
		if a.Refused {
			refused = append(refused, a.Seq)
			continue
		}
		if a.Seq <= 3 {
			t.Fatalf("ack of %d again after 3", a.Seq)
		}
		acked = a.Seq
	}
	if len(refused) != 1 || refused[0] != 5 {
		t.Fatalf("refused %v, want [5]", refused)
	}
	if st := f.q.Stats(); st.Depth != 5 {
		t.Fatalf("the queue holds %d, want 5", st.Depth)
	}
}
