package session

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// listener runs an accept loop that calls Server for every connection, as
// the receiver package will, and reports each result.
type listener struct {
	ln      net.Listener
	results chan serverResult
	done    chan struct{}
}

type serverResult struct {
	c   *Conn
	err error
}

func listen(t *testing.T, cfg Config) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln, results: make(chan serverResult, 16), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c, err := Server(context.Background(), nc, cfg)
				l.results <- serverResult{c, err}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-l.done })
	return l
}

func (l *listener) next(t *testing.T) serverResult {
	t.Helper()
	select {
	case r := <-l.results:
		if r.c != nil {
			t.Cleanup(func() { r.c.Close() })
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no server result")
		return serverResult{}
	}
}

func (l *listener) dial(t *testing.T) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", l.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestBadPeersBeforeHandshake: input that is not Petrel closes only its own
// connection, with a clear error on both ends; the next good connection to
// the same accept loop works.
func TestBadPeersBeforeHandshake(t *testing.T) {
	tlsHello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	tests := []struct {
		name      string
		in        []byte
		close     bool   // close the write side after sending in
		serverErr error  // what Server returns
		text      string // in Server's error and the reason sent back
	}{
		{name: "garbage", in: []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"), serverErr: ErrUnknownType, text: "unknown type 0"},
		{name: "http get", in: []byte("GET / HTTP/1.1\r\nHost: hub-1\r\n\r\n"), serverErr: ErrUnknownType, text: "HTTP"},
		{name: "tls client hello", in: tlsHello, serverErr: ErrUnknownType, text: "TLS"},
		{name: "oversize auth", in: []byte{byte(TypeAuth), 0, 0, 0, 0, 0, 0x80, 0, 0, 0}, serverErr: ErrFrameTooLarge, text: "2147483648"},
		{name: "session frame first", in: frame(TypeSessionCreate, 0, 1, SessionCreate{Window: 1}), serverErr: ErrProtocol, text: "expected Auth"},
		{name: "malformed auth", in: frame(TypeAuth, 0, 0, ErrorPacket{Reason: "short"}), serverErr: ErrMalformed, text: "Auth"},
		{name: "truncated auth", in: frame(TypeAuth, 0, 0, Auth{Name: "x"})[:20], close: true, serverErr: io.ErrUnexpectedEOF, text: "Auth payload"},
		{name: "truncated header", in: []byte{byte(TypeAuth), 0, 0}, close: true, serverErr: io.ErrUnexpectedEOF, text: "read Auth"},
	}
	l := listen(t, testConfig("hub-1"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := l.dial(t)
			if _, err := nc.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				_ = nc.(*net.TCPConn).CloseWrite()
			}
			r := l.next(t)
			if r.c != nil || !errors.Is(r.err, tc.serverErr) || !strings.Contains(r.err.Error(), tc.text) {
				t.Fatalf("Server: %v, %v; want %v with %q", r.c, r.err, tc.serverErr, tc.text)
			}
			e, err := readUntilError(nc)
			if tc.close {
				return // nothing to tell a peer that left
			}
			if err != nil || e.Code == 0 || !strings.Contains(e.Reason, tc.text) {
				t.Fatalf("peer got %+v, %v; want a reason with %q", e, err, tc.text)
			}
			if _, _, err := ReadFrame(nc, 1<<20, nil); !isClosed(err) {
				t.Fatalf("connection left open: %v", err)
			}
		})
	}
	checkGoodConnection(t, l)
}

// TestBadPeersAfterHandshake: a peer that authenticated and then breaks the
// protocol loses its connection with a reason, and nothing else.
func TestBadPeersAfterHandshake(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		close bool
		err   error
		text  string
	}{
		{name: "unknown type", in: []byte{99, 0, 0, 0, 0, 1, 0, 0, 0, 0}, err: ErrUnknownType, text: "Type(99)"},
		{name: "oversize data", in: []byte{byte(TypeData), 0, 0, 0, 0, 1, 0x80, 0, 0, 0}, err: ErrFrameTooLarge, text: "2147483648"},
		{name: "oversize control", in: []byte{byte(TypePing), 0, 0, 0, 0, 0, 0, 0x10, 0, 0}, err: ErrFrameTooLarge, text: "Ping frame"},
		{name: "truncated data", in: frame(TypeData, 0, 1, Data{Seq: 1, Message: []byte("abcdef")})[:15], close: true, err: io.ErrUnexpectedEOF, text: "Data payload"},
		{name: "malformed create", in: frame(TypeSessionCreate, 0, 1, Ping{}), err: ErrMalformed, text: "SessionCreate"},
		{name: "topic without subscribe", in: frame(TypeSessionCreate, FlagTopic, 1, SessionCreate{Versions: []uint16{1}, Window: 1, Topic: &TopicSubscription{}}), err: ErrProtocol, text: "topic without subscribe"},
		{name: "topic create without its fields", in: frame(TypeSessionCreate, FlagSubscribe|FlagTopic, 1, SessionCreate{Versions: []uint16{1}, Window: 1}), err: ErrMalformed, text: "subscription"},
		{name: "hello again", in: frame(TypeHello, 0, 0, Hello{}), err: ErrProtocol, text: "Hello on session 0 after the handshake"},
		{name: "data on session 0", in: frame(TypeData, 0, 0, Data{Seq: 1}), err: ErrProtocol, text: "Data on session 0"},
		{name: "ping on a session", in: frame(TypePing, 0, 4, Ping{}), err: ErrProtocol, text: "valid only on session 0"},
		{name: "reserved flags", in: frame(TypePing, 0x80, 0, Ping{}), err: ErrProtocol, text: "reserved flags"},
		{name: "ack to server", in: frame(TypeDataAck, 0, 1, DataAck{Seq: 1}), err: ErrProtocol, text: "sent to the server"},
		{name: "close response not closing", in: append(
			frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Window: 1}),
			frame(TypeSessionCloseResponse, 0, 1, nil)...), err: ErrProtocol, text: "not closing"},
		{name: "session id in use", in: append(
			frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Window: 1}),
			frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Window: 1})...), err: ErrProtocol, text: "already in use"},
	}
	l := listen(t, testConfig("hub-1"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := l.dial(t)
			rawClient(t, nc, "mallory")
			r := l.next(t)
			if r.err != nil {
				t.Fatal(r.err)
			}
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := nc.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				_ = nc.(*net.TCPConn).CloseWrite()
			}
			err := waitDone(t, r.c)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Err %v, want %v with %q", err, tc.err, tc.text)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Fatalf("the bad frame cost %d bytes of allocation", grew)
			}
			if tc.close {
				return
			}
			e, rerr := readUntilError(nc)
			if rerr != nil || !strings.Contains(e.Reason, tc.text) {
				t.Fatalf("peer got %+v, %v; want a reason with %q", e, rerr, tc.text)
			}
		})
	}
	checkGoodConnection(t, l)
}

func checkGoodConnection(t *testing.T, l *listener) {
	t.Helper()
	nc := l.dial(t)
	cres := make(chan serverResult, 1)
	go func() {
		c, err := Client(context.Background(), nc, testConfig("plant-7"))
		cres <- serverResult{c, err}
	}()
	s := l.next(t)
	c := <-cres
	if s.err != nil || c.err != nil {
		t.Fatalf("good connection: server %v, client %v", s.err, c.err)
	}
	defer c.c.Close()
	snd, rcv := openPair(t, c.c, s.c, "orders", 4, 4)
	if err := snd.SendData(context.Background(), 1, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if d, err := rcv.Recv(context.Background()); err != nil || string(d.Message) != "ok" {
		t.Fatalf("good connection: %q %v", d.Message, err)
	}
}

// TestWindowOverflow: a sender with more Data waiting than the window is
// disconnected with ErrWindow.
func TestWindowOverflow(t *testing.T) {
	cn, sn := net.Pipe()
	defer cn.Close()
	s, err := startServer(t, sn, testConfig("hub-1"), func() { rawClient(t, cn, "mallory") })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		_, _ = cn.Write(frame(TypeSessionCreate, 0, 1, SessionCreate{Versions: []uint16{1}, Address: "q", Window: 1000}))
	}()
	sess, err := s.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Accept(3); err != nil {
		t.Fatal(err)
	}
	go func() {
		for seq := range uint64(5) {
			if _, err := cn.Write(frame(TypeData, 0, 1, Data{Seq: seq + 1})); err != nil {
				return
			}
		}
	}()
	e, err := readUntilError(cn)
	if err != nil || e.Code != CodeLimit || !strings.Contains(e.Reason, "window") {
		t.Fatalf("peer got %+v, %v; want CodeLimit", e, err)
	}
	err = waitDone(t, s)
	if !errors.Is(err, ErrWindow) || !strings.Contains(err.Error(), "more than 3 Data packets") {
		t.Fatalf("Err %v, want ErrWindow", err)
	}
	// The three within the window are still delivered, then the error.
	for seq := uint64(1); seq <= 3; seq++ {
		if d, err := sess.Recv(context.Background()); err != nil || d.Seq != seq {
			t.Fatalf("Recv: %+v %v", d, err)
		}
	}
	if _, err := sess.Recv(context.Background()); !errors.Is(err, ErrWindow) {
		t.Fatalf("Recv after death: %v", err)
	}
}

// TestAckOverflow: a receiver that sends more acks than the window allows
// (while the sender does not read them) is disconnected with ErrWindow.
func TestAckOverflow(t *testing.T) {
	cn, sn := net.Pipe()
	defer sn.Close()
	go func() {
		sid, err := rawSession(t, sn, 2)
		if err != nil {
			return
		}
		for seq := range uint64(10) {
			if _, err := sn.Write(frame(TypeDataAck, 0, sid, DataAck{Seq: seq})); err != nil {
				return
			}
		}
		_, _ = readUntilError(sn)
	}()
	c, err := Client(context.Background(), cn, testConfig("plant-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snd, err := c.Open(context.Background(), "q", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, c); !errors.Is(err, ErrWindow) || !strings.Contains(err.Error(), "acknowledgements") {
		t.Fatalf("Err %v, want ErrWindow", err)
	}
	n := 0
	for range snd.Acks() {
		n++
	}
	if n != 6 {
		t.Fatalf("%d acks delivered, want 2×2+2", n)
	}
}
