package mqttgw

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// readSome reads what arrives within d.
func readSome(t *testing.T, c net.Conn, d time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1<<20)
	n, err := c.Read(buf)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestCorkHoldsWritesUntilUncorked(t *testing.T) {
	peer, server := petreltest.TCPPair(t)
	cc := &corkConn{Conn: server}

	// Uncorked, a write goes out at once.
	if _, err := cc.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if got := readSome(t, peer, time.Second); string(got) != "a" {
		t.Fatalf("uncorked write: peer read %q", got)
	}

	// Corked twice, nothing goes out until the last uncork.
	cc.cork()
	cc.cork()
	for _, s := range []string{"b", "c", "d"} {
		if n, err := cc.Write([]byte(s)); n != 1 || err != nil {
			t.Fatalf("corked write: %d, %v", n, err)
		}
	}
	if got := readSome(t, peer, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("corked writes went out: %q", got)
	}
	if err := cc.uncork(); err != nil {
		t.Fatal(err)
	}
	if got := readSome(t, peer, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("writes went out with a cork still in: %q", got)
	}
	if err := cc.uncork(); err != nil {
		t.Fatal(err)
	}
	if got := readSome(t, peer, time.Second); string(got) != "bcd" {
		t.Fatalf("after the last uncork the peer read %q, want bcd in order", got)
	}
}

func TestCorkWritesPastItsBound(t *testing.T) {
	peer, server := petreltest.TCPPair(t)
	cc := &corkConn{Conn: server}
	cc.cork()
	chunk := bytes.Repeat([]byte("x"), 4096)
	sent := 0
	for sent < corkMax {
		if _, err := cc.Write(chunk); err != nil {
			t.Fatal(err)
		}
		sent += len(chunk)
	}
	// The bound reached, what was held went out, corked or not.
	got := make([]byte, sent)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("corked writes past %d bytes were held back: %v", corkMax, err)
	}
	if len(cc.buf) != 0 {
		t.Fatalf("%d bytes still held past the bound", len(cc.buf))
	}
	if cap(cc.buf) > corkKeep {
		t.Fatalf("the connection keeps a buffer of %d bytes after the batch, more than %d", cap(cc.buf), corkKeep)
	}
	if err := cc.uncork(); err != nil {
		t.Fatal(err)
	}
}

func TestCorkFailedFlushFailsLaterWrites(t *testing.T) {
	peer, server := petreltest.TCPPair(t)
	cc := &corkConn{Conn: server}
	cc.cork()
	if _, err := cc.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	server.Close() // the connection is gone before the flush
	if err := cc.uncork(); err == nil {
		t.Fatal("uncork over a closed connection reported no error")
	}
	if _, err := cc.Write([]byte("next")); err == nil {
		t.Fatal("a write after a failed flush reported no error")
	}
}

// A gate holds back every write, past corkMax too, and across a cork
// taken out meanwhile; the writes go, in order, when the last gate is
// lifted.
func TestGateHoldsWritesWhateverTheirSize(t *testing.T) {
	peer, server := petreltest.TCPPair(t)
	cc := &corkConn{Conn: server}
	cc.gate()
	cc.cork()
	chunk := bytes.Repeat([]byte("x"), 4096)
	sent := 0
	for sent < 2*corkMax {
		if _, err := cc.Write(chunk); err != nil {
			t.Fatal(err)
		}
		sent += len(chunk)
	}
	if err := cc.uncork(); err != nil {
		t.Fatal(err)
	}
	cc.gate()
	if _, err := cc.Write([]byte("end")); err != nil {
		t.Fatal(err)
	}
	if err := cc.ungate(); err != nil {
		t.Fatal(err)
	}
	if got := readSome(t, peer, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("%d bytes went out with a gate still up", len(got))
	}
	if err := cc.ungate(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, sent+3)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("after the last gate: %v", err)
	}
	if string(got[sent:]) != "end" {
		t.Fatalf("out of order: the last bytes are %q", got[sent:])
	}
}

// Past gateMax bytes held, a write waits for the gate to lift rather than
// hold more, and goes, in order, once it does.
func TestGateBoundsWhatItHolds(t *testing.T) {
	peer, server := petreltest.TCPPair(t)
	cc := &corkConn{Conn: server}
	cc.gate()
	if _, err := cc.Write(bytes.Repeat([]byte("x"), gateMax)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := cc.Write([]byte("end"))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write past gateMax returned (%v) with the gate up", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := cc.ungate(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not go once the gate lifted")
	}
	got := make([]byte, gateMax+3)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if string(got[gateMax:]) != "end" {
		t.Fatalf("out of order: the last bytes are %q", got[gateMax:])
	}
}
