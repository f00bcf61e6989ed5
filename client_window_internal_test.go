package petrel

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The publisher's flight is bounded by DialOptions.WindowBytes as well as
// by Window: with no connection, messages wait in the flight, and the one
// past the byte bound waits for room; a message larger than the bound
// goes into an empty flight alone.
func TestPublisherWindowBytesBoundsFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &publisher{c: &Client{ctx: ctx}, limit: 100, bytes: 1000}
	add := func(size int) error {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return p.enqueue(wctx, &pubReq{data: make([]byte, size), size: int64(size), dest: "q", done: make(chan struct{})})
	}
	for i := range 3 {
		if err := add(300); err != nil {
			t.Fatalf("message %d of 300 bytes with %d held: %v", i+1, p.held, err)
		}
	}
	if err := add(300); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fourth 300 bytes past a window of 1000: %v, want it to wait", err)
	}
	if err := add(100); err != nil {
		t.Fatalf("100 bytes more, to exactly 1000: %v", err)
	}
	if len(p.flight) != 4 || p.held != 1000 {
		t.Fatalf("flight of %d holding %d bytes, want 4 holding 1000", len(p.flight), p.held)
	}
	p.fail(ErrClosed)
	if p.held != 0 {
		t.Fatalf("%d bytes held after fail, want 0", p.held)
	}
	empty := &publisher{c: &Client{ctx: ctx}, limit: 100, bytes: 1000}
	p = empty
	if err := add(5000); err != nil {
		t.Fatalf("5000 bytes into an empty flight: %v", err)
	}
	if err := add(1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("1 byte behind a message past the window: %v, want it to wait", err)
	}
}

// A default node grants a client's publish session DefaultClientWindow
// packets, above its link.window of 1000, and a client asking for less
// gets what it asked.
func TestRemoteDefaultPublishWindow(t *testing.T) {
	for _, tc := range []struct {
		linkWindow, ask, want int
	}{
		{0, 0, DefaultClientWindow},
		{8, 100, 100},
		{20000, 0, DefaultClientWindow},
		{20000, 30000, 20000},
	} {
		n, err := Open(context.Background(), Config{Name: "plant-7", DataDir: t.TempDir(), Listen: "127.0.0.1:0",
			Logger: quietLog, Link: LinkConfig{Window: tc.linkWindow}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(context.Background(), "tcp://"+n.ListenAddr(), DialOptions{Window: tc.ask, Logger: quietLog})
		if err != nil {
			n.Close()
			t.Fatal(err)
		}
		var got int
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			c.pub.mu.Lock()
			if c.pub.sess != nil {
				got = c.pub.window
			}
			c.pub.mu.Unlock()
			if got != 0 {
				break
			}
		}
		c.Close()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("link.window %d, client asking %d: publish window %d, want %d", tc.linkWindow, tc.ask, got, tc.want)
		}
	}
}
