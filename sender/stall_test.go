package sender

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// silentPeer accepts connections and their sessions, reads their data
// and never acks: a next hop that is alive (it answers heartbeats) but
// does not commit.
func silentPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peerOn(t, ln, false)
	return ln.Addr().String()
}

// TestStalledWindowIsReported: with a next hop that takes data but never
// acks, the window fills and the link says it is stalled, while it stays
// connected.
func TestStalledWindowIsReported(t *testing.T) {
	addr := silentPeer(t)
	st, m := linkTo(t, addr, Config{Window: 4, StallAfter: 100 * time.Millisecond}, session.Config{})
	q, err := st.Queue(context.Background(), "orders@b", queue.KindSend)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		m := &message.Message{ID: uint64(i + 1), Origin: message.NodeID{1}, Destination: "orders@b", Kind: message.KindData, Priority: 4}
		if err := q.Put(context.Background(), m, false); err != nil {
			t.Fatal(err)
		}
	}
	m.Ensure(q, "b")
	var s Status
	petreltest.Eventually(t, "the link reported stalled", func() bool { s = m.Statuses()[0]; return s.Stalled },
		func() string { return fmt.Sprintf("%+v", m.Statuses()[0]) })
	if s.State != StateConnected || s.InFlight != 4 || s.Acked != 0 {
		t.Fatalf("stalled link: %+v", s)
	}
}
