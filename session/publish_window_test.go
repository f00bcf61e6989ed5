package session

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// A server's PublishWindow raises the window of a client's publish
// session above what Accept is given, up to the client's request, and
// leaves a link's session at Accept's window: a link's sender keeps a
// message count, a client bounds its flight in bytes as well.
func TestPublishWindowRaisesPublishSessionsOnly(t *testing.T) {
	scfg := testConfig("hub-1")
	scfg.PublishWindow = 4096
	c, s := pair(t, testConfig("app-1"), scfg)
	ctx := within(t)
	accepted := make(chan *Session, 3)
	go func() {
		for range 3 {
			sess, err := s.Accept(context.Background())
			if err != nil {
				t.Errorf("accept: %v", err)
				close(accepted)
				return
			}
			if err := sess.Accept(100); err != nil {
				t.Errorf("accept session: %v", err)
			}
			accepted <- sess
		}
	}()
	for _, tc := range []struct {
		name      string
		open      func() (*Session, error)
		want      uint32
		publishes bool
	}{
		{"publish asking more", func() (*Session, error) { return c.OpenPublish(ctx, 8192) }, 4096, true},
		{"publish asking less", func() (*Session, error) { return c.OpenPublish(ctx, 2000) }, 2000, true},
		{"link", func() (*Session, error) { return c.Open(ctx, "q", 8192) }, 100, false},
	} {
		snd, err := tc.open()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rcv := <-accepted
		if rcv == nil {
			t.FailNow()
		}
		if snd.Window() != tc.want || rcv.Window() != tc.want || rcv.Publish() != tc.publishes {
			t.Errorf("%s: windows %d (client), %d (server), publish %v; want %d, publish %v",
				tc.name, snd.Window(), rcv.Window(), rcv.Publish(), tc.want, tc.publishes)
		}
		// The server buffers what the window allows: a full window of
		// packets is taken without the connection stalling.
		for seq := uint64(1); seq <= uint64(tc.want); seq++ {
			if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
				t.Fatalf("%s: send %d: %v", tc.name, seq, err)
			}
		}
		for seq := uint64(1); seq <= uint64(tc.want); seq++ {
			d, err := rcv.Recv(ctx)
			if err != nil || d.Seq != seq {
				t.Fatalf("%s: recv %d: %+v, %v", tc.name, seq, d, err)
			}
		}
	}
}

// A server session's queue of received Data holds what it holds, not what
// the window allows: a new session has no room made, a burst of a whole
// window is taken in order by a reader that lags and catches up, and the
// emptied queue gives the burst's memory back.
func TestInboundHoldsWhatItHolds(t *testing.T) {
	c, s := tcpPair(t, testConfig("a"), testConfig("b"))
	ctx := within(t)
	const window = 3000
	snd, rcv := openPair(t, c, s, "q", window, window)
	rcv.mu.Lock()
	room := cap(rcv.inbound.q)
	rcv.mu.Unlock()
	if room != 0 {
		t.Fatalf("a new session made room for %d packets, want none", room)
	}
	var taken atomic.Uint64
	done := make(chan error, 1)
	go func() {
		for seq := uint64(1); seq <= 3*window; seq++ {
			d, err := rcv.Recv(ctx)
			if err != nil || d.Seq != seq {
				done <- fmt.Errorf("recv %d: %+v, %v", seq, d, err)
				return
			}
			taken.Store(seq)
			if seq%500 == 0 {
				time.Sleep(2 * time.Millisecond) // lag, so that the queue fills
			}
		}
		done <- nil
	}()
	for seq := uint64(1); seq <= 3*window; seq++ {
		// Keep within the window, as a sender reading acks would.
		for seq > window && taken.Load() < seq-window {
			time.Sleep(100 * time.Microsecond)
		}
		if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
			t.Fatalf("send %d: %v", seq, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	room, held := cap(rcv.inbound.q), rcv.inbound.len()
	rcv.mu.Unlock()
	if held != 0 || room > keepCap {
		t.Errorf("emptied queue holds %d with room for %d, want 0 and at most %d", held, room, keepCap)
	}
}
