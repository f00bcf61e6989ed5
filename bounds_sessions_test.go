package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/session"
)

// TestSessionsPerConnectionBound: a peer that asks for sessions past the
// 1,024 one connection holds (its own bound is higher, so it asks) is
// refused, each time, with the reason; the connection and the sessions it
// has keep working, one it closes gives its room back, and the node's
// /metrics counts the refusals.
func TestSessionsPerConnectionBound(t *testing.T) {
	b := openNode(t, "b", "127.0.0.1:0", withAdmin)
	nc, err := net.Dial("tcp", b.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	greedy := nodeID("greedy")
	c, err := session.Client(ctx, nc, session.Config{
		Name: "greedy", ID: greedy, MaxSessions: 2 * session.DefaultMaxSessions, Logger: quiet,
	})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	t.Cleanup(func() { c.Close() })

	sessions := make([]*session.Session, session.DefaultMaxSessions)
	for i := range sessions {
		if sessions[i], err = c.Open(ctx, "orders@b", 1); err != nil {
			t.Fatalf("session %d of %d: %v", i+1, len(sessions), err)
		}
	}
	const past = 2
	for i := range past {
		_, err := c.Open(ctx, "orders@b", 1)
		var re *session.RemoteError
		want := fmt.Sprintf("%d sessions already open on this connection", session.DefaultMaxSessions)
		if !errors.Is(err, session.ErrRefused) || !errors.As(err, &re) || !strings.Contains(re.Reason, want) {
			t.Fatalf("session %d past the bound: %v; want a refusal saying %q", i+1, err, want)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection died at the refusals: %v", err)
	}
	// The sessions open before the bound still carry messages.
	for i, sess := range []*session.Session{sessions[0], sessions[len(sessions)-1]} {
		if r := sendAll(t, sess, msg(greedy, uint64(i+1), "still here")); r[0] != "" {
			t.Fatalf("message on an earlier session refused: %s", r[0])
		}
	}
	if d := depth(b, "orders"); d != 2 {
		t.Fatalf("orders holds %d messages, want 2", d)
	}
	// A session closed gives its room back.
	if err := sessions[1].Close(ctx, "done"); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := c.Open(ctx, "orders@b", 1); err != nil {
		t.Fatalf("open after a close freed room: %v", err)
	}

	m := scrape(t, b)
	if got := m[`petrel_receiver_sessions_refused_total{reason="max_sessions"}`]; got != past {
		t.Errorf(`petrel_receiver_sessions_refused_total{reason="max_sessions"} = %v, want %d`, got, past)
	}
	if got, ok := m[`petrel_receiver_sessions_refused_total{reason="policy"}`]; !ok || got != 0 {
		t.Errorf(`petrel_receiver_sessions_refused_total{reason="policy"} = %v (present %v), want 0`, got, ok)
	}
	if rs := b.ReceiverStats(); rs.SessionsOverLimit != past || rs.SessionsRefused != past {
		t.Errorf("ReceiverStats: %d over the limit of %d refused, want %d of %d", rs.SessionsOverLimit, rs.SessionsRefused, past, past)
	}
}
