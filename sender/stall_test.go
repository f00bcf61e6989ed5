package sender

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// silentPeer accepts one connection and its sessions, reads their data and
// never acks: a next hop that is alive (it answers heartbeats) but does not
// commit.
func silentPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c, err := session.Server(ctx, nc, session.Config{Name: "b", ID: message.NodeID{2}, Logger: quiet})
		if err != nil {
			return
		}
		defer c.Close()
		for {
			s, err := c.Accept(ctx)
			if err != nil {
				return
			}
			s.Accept(4)
			wg.Go(func() {
				for {
					if _, err := s.Recv(ctx); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// TestStalledWindowIsReported: with a next hop that takes data but never
// acks, the window fills and the link says it is stalled, while it stays
// connected.
func TestStalledWindowIsReported(t *testing.T) {
	addr := silentPeer(t)
	st, err := queue.Open(context.Background(), queue.Config{Path: filepath.Join(t.TempDir(), "petrel.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	dir := address.NewDirectory()
	cs, _ := address.ParseConnectors("tcp://" + addr)
	dir.SetStatic([]address.Entry{{Name: "b", Connectors: cs, Source: address.SourceStatic}})
	m := NewManager(Config{Window: 4, StallAfter: 100 * time.Millisecond, Logger: quiet},
		session.Config{Name: "a", ID: message.NodeID{1}, Logger: quiet}, dir,
		func(node string) (string, bool) { return node, node == "b" })
	defer m.Stop()
	m.Ensure(q, "b")
	var s Status
	petreltest.Eventually(t, "the link reported stalled", func() bool { s = m.Statuses()[0]; return s.Stalled },
		func() string { return fmt.Sprintf("%+v", m.Statuses()[0]) })
	if s.State != StateConnected || s.InFlight != 4 || s.Acked != 0 {
		t.Fatalf("stalled link: %+v", s)
	}
}
