package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdlePeerDropped: a peer that reads but never writes, not even a Pong,
// is dropped after IdleTimeout.
func TestIdlePeerDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		cfg := testConfig("hub-1")
		cfg.IdleTimeout = 30 * time.Second
		s, err := startServer(t, sn, cfg, func() { rawClient(t, cn, "mute") })
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		go func() { _, _ = io.Copy(io.Discard, cn) }()
		start := time.Now()
		<-s.Done()
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("dropped after %v, want 30s", d)
		}
		if err := s.Err(); !errors.Is(err, ErrIdle) || !strings.Contains(err.Error(), "mute") {
			t.Fatalf("Err %v, want ErrIdle", err)
		}
		if st := s.Stats(); st.FramesOut < 2 {
			t.Errorf("server sent %d frames, want its pings", st.FramesOut)
		}
	})
}

// TestPeerAnsweringPingsStaysUp: a peer that sends nothing but Pongs to the
// server's Pings is never dropped.
func TestPeerAnsweringPingsStaysUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cn, sn := net.Pipe()
		cfg := testConfig("hub-1")
		cfg.IdleTimeout = 30 * time.Second
		s, err := startServer(t, sn, cfg, func() { rawClient(t, cn, "pong-only") })
		if err != nil {
			t.Fatal(err)
		}
		pongs := make(chan int, 1)
		go func() {
			n := 0
			defer func() { pongs <- n }()
			for {
				h, p, err := ReadFrame(cn, 1<<20, nil)
				if err != nil {
					return
				}
				if h.Type == TypePing {
					ping, _ := DecodePing(p)
					if _, err := cn.Write(frame(TypePong, 0, 0, ping)); err != nil {
						return
					}
					n++
				}
			}
		}()
		time.Sleep(10 * time.Minute)
		if err := s.Err(); err != nil {
			t.Fatalf("connection died: %v", err)
		}
		s.Close()
		if n := <-pongs; n < 59 {
			t.Fatalf("%d pongs in 10 minutes, want a ping every 10s", n)
		}
		cn.Close()
	})
}

// TestIdleConnsStayUp: two Conns with nothing to say keep each other alive.
func TestIdleConnsStayUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
		openPair(t, c, s, "orders", 4, 4)
		time.Sleep(time.Hour)
		if c.Err() != nil || s.Err() != nil {
			t.Fatalf("idle connection died: %v / %v", c.Err(), s.Err())
		}
		c.Close()
		s.Close()
	})
}

// TestStalledPeerBlocksSendDataUntilClose: a peer that stops reading fills
// the write queue, so SendData blocks, and Close releases it.
func TestStalledPeerBlocksSendDataUntilClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, release := stalledServer(t)
		defer release()
		snd, err := c.Open(context.Background(), "q", 1000)
		if err != nil {
			t.Fatal(err)
		}
		sent := make(chan error, 1)
		go func() {
			msg := make([]byte, 64<<10)
			for seq := uint64(1); ; seq++ {
				if err := snd.SendData(context.Background(), seq, msg); err != nil {
					sent <- err
					return
				}
			}
		}()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("SendData returned %v; want it blocked", err)
		default:
		}
		start := time.Now()
		c.Close()
		if err := <-sent; !errors.Is(err, ErrClosed) {
			t.Fatalf("SendData: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Close took %v", d)
		}
	})
}

// TestStalledPeerWriteTimeout: a write that makes no progress for
// WriteTimeout fails the connection.
func TestStalledPeerWriteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, release := stalledServer(t)
		defer release()
		snd, err := c.Open(context.Background(), "q", 1000)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := snd.SendData(context.Background(), 1, make([]byte, 1<<10)); err != nil {
			t.Fatal(err)
		}
		<-c.Done()
		if d := time.Since(start); d != DefaultWriteTimeout {
			t.Errorf("failed after %v, want %v", d, DefaultWriteTimeout)
		}
		if err := c.Err(); !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "write to") {
			t.Fatalf("Err %v, want a write timeout", err)
		}
		<-snd.Done()
	})
}

// stalledServer returns a client Conn whose raw server accepts one session
// and then stops reading until release is called.
func stalledServer(t *testing.T) (*Conn, func()) {
	return muteServer(t, false)
}

// muteServer returns a client Conn whose raw server accepts one session and
// then never writes again; it reads (and ignores) everything if drain is
// set, else nothing, until release is called.
func muteServer(t *testing.T, drain bool) (*Conn, func()) {
	cn, sn := net.Pipe()
	stop := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer sn.Close()
		if _, err := rawServer(t, sn, Hello{MinVersion: 1, MaxVersion: 1, Name: "stalled"}, AuthOK{}); err != nil {
			return
		}
		h, p, err := ReadFrame(sn, 1<<20, nil)
		if err != nil {
			return
		}
		req, _ := DecodeSessionCreate(p)
		if _, err := sn.Write(frame(TypeSessionCreateResponse, 0, h.Session, SessionCreateResponse{Version: 1, Window: req.Window})); err != nil {
			return
		}
		if drain {
			_, _ = io.Copy(io.Discard, sn)
			return
		}
		<-stop
	}()
	c, err := Client(context.Background(), cn, testConfig("plant-7"))
	if err != nil {
		t.Fatal(err)
	}
	return c, func() { close(stop); c.Close(); <-exited }
}

// TestPingFloodWithoutReading: a peer that sends Pings but never reads the
// Pongs is disconnected once a bounded amount of replies is queued, rather
// than making this side buffer without end.
func TestPingFloodWithoutReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		s, err := startServer(t, sn, testConfig("hub-1"), func() { rawClient(t, cn, "flood") })
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ping := frame(TypePing, 0, 0, Ping{Nonce: 1})
		flood := bytes.Repeat(ping, 2*controlBytes/len(ping))
		go func() { _, _ = cn.Write(flood) }()
		<-s.Done()
		if err := s.Err(); !errors.Is(err, ErrLimit) {
			t.Fatalf("Err %v, want ErrLimit", err)
		}
	})
}

// TestOpenTimeoutAbandons: Open gives up after HandshakeTimeout when the
// server application never accepts; a late Accept then finds the session
// closed by the client, and both sides are left with nothing open.
func TestOpenTimeoutAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
		start := time.Now()
		_, err := c.Open(context.Background(), "orders", 10)
		if err == nil || !strings.Contains(err.Error(), "no response from hub-1 within 10s") {
			t.Fatalf("Open: %v", err)
		}
		if d := time.Since(start); d != DefaultHandshakeTimeout {
			t.Fatalf("Open gave up after %v", d)
		}
		late, err := s.Accept(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := late.Accept(10); err != nil {
			t.Fatal(err)
		}
		if _, err := late.Recv(context.Background()); err != io.EOF {
			t.Fatalf("late session Recv: %v, want io.EOF", err)
		}
		if !strings.Contains(late.Err().Error(), "open abandoned") {
			t.Fatalf("late session ended with %v", late.Err())
		}
		synctest.Wait()
		if c.Stats().Sessions != 0 || s.Stats().Sessions != 0 {
			t.Fatalf("sessions left: client %d, server %d", c.Stats().Sessions, s.Stats().Sessions)
		}
		c.Close()
		s.Close()
	})
}

// TestOpenContextCancelled: Open returns ctx's error, and the session the
// server accepted meanwhile is closed there.
func TestOpenContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Open(ctx, "orders", 10); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Open: %v", err)
		}
		if c.Stats().Sessions != 0 {
			t.Fatal("the abandoned session is still held")
		}
		c.Close()
		s.Close()
	})
}

// TestCloseTimeout: a close frees the session when the peer never
// answers: Close after HandshakeTimeout; CloseWithin after its bound, or
// after HandshakeTimeout when the bound is zero or longer (a zero once cut
// the close short).
func TestCloseTimeout(t *testing.T) {
	within := func(d time.Duration) func(*Session) error {
		return func(s *Session) error { return s.CloseWithin("bye", d) }
	}
	for _, tc := range []struct {
		name  string
		close func(*Session) error
		want  string
	}{
		{"Close", func(s *Session) error { return s.Close(context.Background(), "bye") }, "no response within 10s"},
		{"CloseWithin zero", within(0), "no response within 10s"},
		{"CloseWithin longer", within(time.Hour), "no response within 10s"},
		{"CloseWithin shorter", within(time.Second), context.DeadlineExceeded.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, release := muteServer(t, true)
				defer release()
				snd, err := c.Open(context.Background(), "q", 10)
				if err != nil {
					t.Fatal(err)
				}
				if err := tc.close(snd); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("close: %v, want %q", err, tc.want)
				}
				if !errors.Is(snd.Err(), ErrClosed) || c.Stats().Sessions != 0 {
					t.Fatalf("session %v, %d held", snd.Err(), c.Stats().Sessions)
				}
			})
		})
	}
}
