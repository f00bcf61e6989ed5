package sender

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// ackingPeer accepts connections and their sessions, and acks every
// packet as it reads it. It counts the connections it accepted.
func ackingPeer(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String(), peerOn(t, ln, true)
}

// peerOn is a next hop on ln: it accepts connections and their sessions,
// and reads their data, acking each packet if ack is set. It counts the
// connections it accepted.
func peerOn(t *testing.T, ln net.Listener, ack bool) (conns *atomic.Int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	conns = new(atomic.Int32)
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				c, err := session.Server(ctx, nc, session.Config{Name: "b", ID: message.NodeID{2}, Logger: quiet})
				if err != nil {
					return
				}
				defer c.Close()
				conns.Add(1)
				for {
					s, err := c.Accept(ctx)
					if err != nil {
						return
					}
					s.Accept(4)
					wg.Go(func() {
						for {
							d, err := s.Recv(ctx)
							if err != nil {
								return
							}
							if ack && s.Ack(d.Seq) != nil {
								return
							}
						}
					})
				}
			})
		}
	})
	return conns
}

// TestSendQueuesPastAConnectionsSessionsGoOnAnother: with more send
// queues toward one neighbour than one connection carries sessions, the
// pool dials more connections to it, and every queue drains. Before, the
// queues past the bound backed off for as long as the others stayed open.
func TestSendQueuesPastAConnectionsSessionsGoOnAnother(t *testing.T) {
	addr, conns := ackingPeer(t)
	const perConn, queues = 2, 5
	st, m := linkTo(t, addr, Config{Window: 4}, session.Config{MaxSessions: perConn})
	var qs []*queue.Queue
	id := uint64(0)
	for i := range queues {
		name := fmt.Sprintf("orders-%d@b", i)
		q, err := st.Queue(context.Background(), name, queue.KindSend)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			id++
			msg := &message.Message{ID: id, Origin: message.NodeID{1}, Destination: name, Kind: message.KindData, Priority: 4}
			if err := q.Put(context.Background(), msg, false); err != nil {
				t.Fatal(err)
			}
		}
		m.Ensure(q, "b")
		qs = append(qs, q)
	}
	petreltest.Eventually(t, "every send queue drained", func() bool {
		for _, q := range qs {
			if q.Stats().Depth != 0 {
				return false
			}
		}
		return true
	}, func() string {
		out := ""
		for _, s := range m.Statuses() {
			out += fmt.Sprintf("%s: %s depth %d err %q\n", s.Queue, s.State, s.Depth, s.LastError)
		}
		return out
	})
	want := (queues + perConn - 1) / perConn
	if got := conns.Load(); got != int32(want) {
		t.Errorf("b accepted %d connections, want %d: one per %d send queues", got, want, perConn)
	}
	// What petrel_link_connections shows.
	if got := m.Pool().Connections(); got["b"] != want || len(got) != 1 {
		t.Errorf("Pool.Connections() = %v, want b: %d", got, want)
	}
}

// TestTryMainMovesEveryConnectionOffTheBackup: when a failover's main is
// back, the connections past the first that are on the backup close too,
// so that their senders come back on main as well.
func TestTryMainMovesEveryConnectionOffTheBackup(t *testing.T) {
	backup, _ := ackingPeer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	main := ln.Addr().String()
	ln.Close() // main is down
	p := NewPool(session.Config{Name: "a", ID: message.NodeID{1}, Logger: quiet, MaxSessions: 1}, dirOf(t, "failover:(tcp://"+main+",tcp://"+backup+")"), quiet)
	defer p.Close()
	ctx := context.Background()
	var onBackup []*session.Conn
	for i := range 2 {
		c, _, err := p.Open(ctx, "b", func(c *session.Conn) (*session.Session, error) { return c.Open(ctx, fmt.Sprint("q", i), 4) })
		if err != nil {
			t.Fatal(err)
		}
		onBackup = append(onBackup, c)
	}
	if n := p.Connections()["b"]; n != 2 || !p.OnBackup("b") || onBackup[0] == onBackup[1] {
		t.Fatalf("%d connections, on backup %v: want 2 on the backup", n, p.OnBackup("b"))
	}
	ln, err = net.Listen("tcp", main)
	if err != nil {
		t.Skipf("main's port was taken meanwhile: %v", err)
	}
	peerOn(t, ln, true)
	if !p.TryMain(ctx, "b") {
		t.Fatal("TryMain did not move to main")
	}
	for i, c := range onBackup {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d stayed on the backup", i)
		}
	}
	if got := p.Addr("b"); got != main {
		t.Errorf("Addr = %s, want main %s", got, main)
	}
}

// TestIdleSendQueueIsOneGoroutine: once what it sent is acked, a send
// queue's ack loop ends, and the sender alone waits for the next message;
// a connection that dies meanwhile still ends its session, and the sender
// connects again and sends what comes next.
func TestIdleSendQueueIsOneGoroutine(t *testing.T) {
	addr, _ := ackingPeer(t)
	st, m := linkTo(t, addr, Config{Window: 4}, session.Config{})
	q, err := st.Queue(context.Background(), "orders@b", queue.KindSend)
	if err != nil {
		t.Fatal(err)
	}
	put := func(id uint64) {
		t.Helper()
		msg := &message.Message{ID: id, Origin: message.NodeID{1}, Destination: "orders@b", Kind: message.KindData, Priority: 4}
		if err := q.Put(context.Background(), msg, false); err != nil {
			t.Fatal(err)
		}
	}
	drained := func(what string) {
		t.Helper()
		petreltest.Eventually(t, what, func() bool { return q.Stats().Depth == 0 && m.Statuses()[0].InFlight == 0 },
			func() string { return fmt.Sprintf("%+v", m.Statuses()[0]) })
	}
	m.Ensure(q, "b")
	put(1)
	drained("the first message acked")
	petreltest.Eventually(t, "no ack loop once nothing is in flight", func() bool { return petreltest.GoroutinesIn("sender.(*Sender).ackLoop") == 0 },
		func() string { return fmt.Sprintf("%d ack loops", petreltest.GoroutinesIn("sender.(*Sender).ackLoop")) })
	if n := petreltest.GoroutinesIn("sender.(*Sender).linkLoop"); n != 1 {
		t.Fatalf("%d link loops, want 1", n)
	}
	// The connection dies while the queue is idle: nothing but the
	// session's end tells the sender.
	m.Pool().Drop("b")
	petreltest.Eventually(t, "the sender saw its session end and connected again", func() bool {
		s := m.Statuses()[0]
		return s.Reconnects >= 1 && s.State == StateConnected
	}, func() string { return fmt.Sprintf("%+v", m.Statuses()[0]) })
	put(2)
	drained("the message after the reconnect acked")
}

// linkTo opens a store, and a link manager from node a to node b at addr
// with cfg and scfg, whose names, ids and loggers it sets. Both close with
// the test, the manager first.
func linkTo(t *testing.T, addr string, cfg Config, scfg session.Config) (*queue.Store, *Manager) {
	t.Helper()
	st, err := queue.Open(context.Background(), queue.Config{Path: filepath.Join(t.TempDir(), "petrel.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := dirOf(t, "tcp://"+addr)
	cfg.Logger = quiet
	scfg.Name, scfg.ID, scfg.Logger = "a", message.NodeID{1}, quiet
	m := NewManager(cfg, scfg, dir, func(node string) (string, bool) { return node, node == "b" })
	t.Cleanup(m.Stop)
	return st, m
}

// TestPoolOpenStopsAtItsBound: past maxExtraConns more connections to one
// neighbour, each full, Open says so rather than dial another.
func TestPoolOpenStopsAtItsBound(t *testing.T) {
	addr, conns := ackingPeer(t)
	p := NewPool(session.Config{Name: "a", ID: message.NodeID{1}, Logger: quiet, MaxSessions: 1}, dirOf(t, "tcp://"+addr), quiet)
	defer p.Close()
	ctx := context.Background()
	open := func(i int) error {
		_, _, err := p.Open(ctx, "b", func(c *session.Conn) (*session.Session, error) { return c.Open(ctx, fmt.Sprint("q", i), 4) })
		return err
	}
	for i := range maxExtraConns + 1 {
		if err := open(i); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	err := open(maxExtraConns + 1)
	if !errors.Is(err, session.ErrLimit) || !strings.Contains(err.Error(), fmt.Sprintf("%d connections to b", maxExtraConns+1)) {
		t.Fatalf("past the bound: %v, want ErrLimit naming %d connections", err, maxExtraConns+1)
	}
	if got := p.Connections()["b"]; got != maxExtraConns+1 {
		t.Errorf("%d connections, want %d", got, maxExtraConns+1)
	}
	petreltest.Eventually(t, "b saw every connection", func() bool { return conns.Load() == maxExtraConns+1 })
}

// dirOf is a directory that knows node b at connector.
func dirOf(t *testing.T, connector string) *address.Directory {
	t.Helper()
	cs, err := address.ParseConnectors(connector)
	if err != nil {
		t.Fatal(err)
	}
	dir := address.NewDirectory()
	dir.SetStatic([]address.Entry{{Name: "b", Connectors: cs, Source: address.SourceStatic}})
	return dir
}
