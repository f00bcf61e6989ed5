package receiver

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// limitedServer starts a server with the given connection bounds.
func limitedServer(t *testing.T, perIP, handshakes, conns int) *Server {
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
		MaxHandshakes: handshakes, MaxHandshakesPerIP: perIP, MaxConnections: conns,
		Session: session.Config{Name: "b", ID: message.NodeID{2}, HandshakeTimeout: 5 * time.Second, Logger: quiet}}, st, localRouter{q})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		st.Close()
	})
	return srv
}

// rawDial opens a TCP connection from the loopback address from, which
// sends nothing: an idle, unauthenticated peer.
func rawDial(t *testing.T, srv *Server, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// admitted reports whether the server runs a handshake on nc (it sends
// its Hello) rather than closing it at once (EOF, nothing sent).
func admitted(t *testing.T, nc net.Conn) bool {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := nc.Read(b[:])
	switch {
	case err == nil:
		return true
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && !ne.Timeout() { // reset by the peer
		return false
	}
	t.Fatalf("read: %v", err)
	return false
}

func TestHandshakesPerIPBounded(t *testing.T) {
	srv := limitedServer(t, 3, 100, 100)
	for i := range 3 {
		if !admitted(t, rawDial(t, srv, "127.0.0.2")) {
			t.Fatalf("connection %d from 127.0.0.2 rejected under the per-IP bound", i)
		}
	}
	if admitted(t, rawDial(t, srv, "127.0.0.2")) {
		t.Fatal("a 4th handshaking connection from one IP was admitted, bound 3")
	}
	// Another address is not held back by the first one's connections.
	if !admitted(t, rawDial(t, srv, "127.0.0.3")) {
		t.Fatal("a connection from another IP was rejected")
	}
	cc := srv.ConnCounts()
	if cc.Rejected[RejectHandshakesPerIP] != 1 || cc.Handshaking != 4 || cc.Open != 4 {
		t.Fatalf("counts %+v, want 1 rejected per IP, 4 handshaking and open", cc)
	}
}

func TestHandshakesAndConnectionsBounded(t *testing.T) {
	srv := limitedServer(t, 10, 2, 3)
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		if !admitted(t, rawDial(t, srv, ip)) {
			t.Fatalf("connection from %s rejected under the bounds", ip)
		}
	}
	if admitted(t, rawDial(t, srv, "127.0.0.4")) {
		t.Fatal("a 3rd handshaking connection admitted, bound 2")
	}
	if got := srv.ConnCounts().Rejected[RejectHandshakes]; got != 1 {
		t.Fatalf("rejected for handshakes: %d, want 1", got)
	}
}

func TestConnectionsBoundCountsAuthenticated(t *testing.T) {
	srv := limitedServer(t, 10, 10, 2)
	for range 2 {
		connectAsA(t, srv)
	}
	// The server ends its handshake just after the client's.
	deadline := time.Now().Add(5 * time.Second)
	for cc := srv.ConnCounts(); cc.Open != 2 || cc.Handshaking != 0; cc = srv.ConnCounts() {
		if time.Now().After(deadline) {
			t.Fatalf("counts %+v, want 2 open, none handshaking", cc)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if admitted(t, rawDial(t, srv, "127.0.0.2")) {
		t.Fatal("a 3rd connection admitted, bound 2")
	}
	if got := srv.ConnCounts().Rejected[RejectConnections]; got != 1 {
		t.Fatalf("rejected for connections: %d, want 1", got)
	}
}
