package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.DiscardHandler)

func testConfig(name string) Config {
	var id message.NodeID
	copy(id[:], name)
	return Config{Name: name, ID: id, Logger: quiet}
}

// pair connects a client and a server over net.Pipe and runs both
// handshakes. Both Conns are closed when the test ends.
func pair(t testing.TB, ccfg, scfg Config) (client, server *Conn) {
	t.Helper()
	cn, sn := net.Pipe()
	c, s, cerr, serr := handshakePair(cn, sn, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// tcpPair is pair over a real loopback TCP connection.
func tcpPair(t testing.TB, ccfg, scfg Config) (client, server *Conn) {
	t.Helper()
	cn, sn := petreltest.TCPPair(t)
	c, s, cerr, serr := handshakePair(cn, sn, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// handshakePair runs Client on cn and Server on sn at once.
func handshakePair(cn, sn net.Conn, ccfg, scfg Config) (c, s *Conn, cerr, serr error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, serr = Server(context.Background(), sn, scfg)
	}()
	c, cerr = Client(context.Background(), cn, ccfg)
	<-done
	if cerr != nil && c != nil {
		c.Close()
	}
	if serr != nil && s != nil {
		s.Close()
	}
	return c, s, cerr, serr
}

// openPair opens a session from client and accepts it on server.
func openPair(t testing.TB, client, server *Conn, address string, cw, sw uint32) (snd, rcv *Session) {
	t.Helper()
	ctx := context.Background()
	got := make(chan *Session, 1)
	go func() {
		s, err := server.Accept(ctx)
		if err != nil {
			t.Errorf("accept: %v", err)
			close(got)
			return
		}
		if err := s.Accept(sw); err != nil {
			t.Errorf("accept session: %v", err)
		}
		got <- s
	}()
	snd, err := client.Open(ctx, address, cw)
	if err != nil {
		t.Fatalf("open %s: %v", address, err)
	}
	rcv = <-got
	if rcv == nil {
		t.FailNow()
	}
	return snd, rcv
}

// frame encodes one frame.
func frame(t Type, flags uint8, sid uint32, p appender) []byte {
	var payload []byte
	if p != nil {
		payload = p.AppendBinary(nil)
	}
	b := AppendHeader(nil, Header{Type: t, Flags: flags, Session: sid, Length: uint32(len(payload))})
	return append(b, payload...)
}

// rawClient plays the client side of the handshake by hand on nc (no
// secret), so that the test can then write arbitrary frames.
func rawClient(t testing.TB, nc net.Conn, name string) {
	t.Helper()
	h, p, err := ReadFrame(nc, preAuthMaxFrame, nil)
	if err != nil || h.Type != TypeHello {
		t.Fatalf("raw client: read Hello: %v %v", h, err)
	}
	hello, err := DecodeHello(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(name)
	auth := Auth{Version: hello.MaxVersion, Name: name, ID: cfg.ID}
	if _, err := nc.Write(frame(TypeAuth, 0, 0, auth)); err != nil {
		t.Fatalf("raw client: write Auth: %v", err)
	}
	if h, _, err = ReadFrame(nc, preAuthMaxFrame, nil); err != nil || h.Type != TypeAuthOK {
		t.Fatalf("raw client: read AuthOK: %v %v", h, err)
	}
}

// rawServer plays the server side of the handshake by hand on nc.
func rawServer(t testing.TB, nc net.Conn, hello Hello, ok AuthOK) (Auth, error) {
	t.Helper()
	if _, err := nc.Write(frame(TypeHello, 0, 0, hello)); err != nil {
		return Auth{}, err
	}
	h, p, err := ReadFrame(nc, preAuthMaxFrame, nil)
	if err != nil {
		return Auth{}, err
	}
	if h.Type == TypeError {
		e, _ := DecodeErrorPacket(p)
		return Auth{}, &RemoteError{Code: e.Code, Reason: e.Reason}
	}
	auth, err := DecodeAuth(p)
	if err != nil {
		return Auth{}, err
	}
	_, err = nc.Write(frame(TypeAuthOK, 0, 0, ok))
	return auth, err
}

// rawSession plays a server that completes the handshake, takes the
// client's first SessionCreate and accepts it with window. It returns the
// session id.
func rawSession(t testing.TB, nc net.Conn, window uint32) (uint32, error) {
	t.Helper()
	if _, err := rawServer(t, nc, Hello{MinVersion: 1, MaxVersion: 1, Name: "hub-1"}, AuthOK{}); err != nil {
		return 0, err
	}
	h, _, err := ReadFrame(nc, 1<<20, nil)
	if err != nil {
		return 0, err
	}
	_, err = nc.Write(frame(TypeSessionCreateResponse, 0, h.Session, SessionCreateResponse{Version: 1, Window: window}))
	return h.Session, err
}

// readUntilError reads frames from nc until an ErrorPacket on session 0 or
// the end of input, and returns the ErrorPacket (zero if none came).
func readUntilError(nc net.Conn) (ErrorPacket, error) {
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		h, p, err := ReadFrame(nc, 1<<20, nil)
		if err != nil {
			return ErrorPacket{}, err
		}
		if h.Type == TypeError && h.Session == 0 {
			return DecodeErrorPacket(p)
		}
	}
}

// waitDone waits for c to die and returns its error.
func waitDone(t testing.TB, c *Conn) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(10 * time.Second):
		t.Fatal("connection did not die")
		return nil
	}
}

// isClosed reports whether err says the peer closed the connection: an
// end of input, or a reset because unread input was pending when it did.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
