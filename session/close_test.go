package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestCloseBySender(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	for seq := uint64(1); seq <= 3; seq++ {
		if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if err := snd.Close(ctx, "queue deleted"); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if d, err := rcv.Recv(ctx); err != nil || d.Seq != seq {
			t.Fatalf("after close: %+v %v, want seq %d", d, err, seq)
		}
	}
	if _, err := rcv.Recv(ctx); err != io.EOF {
		t.Fatalf("Recv after the peer's close: %v, want io.EOF", err)
	}
	<-rcv.Done()
	<-snd.Done()
	if err := rcv.Err(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "queue deleted") {
		t.Fatalf("receiver Err %v", err)
	}
	if _, ok := <-snd.Acks(); ok {
		t.Fatal("Acks still open")
	}
	if err := snd.SendData(ctx, 4, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("SendData after Close: %v", err)
	}
	if err := rcv.Ack(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after close: %v", err)
	}
	if err := snd.Close(ctx, "again"); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	waitSessions(t, c, 0)
	waitSessions(t, s, 0)
}

func TestCloseByReceiver(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	if err := rcv.Close(ctx, "shutting down"); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-snd.Acks(); ok {
		t.Fatal("Acks still open after the receiver closed")
	}
	err := snd.SendData(ctx, 1, nil)
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("SendData: %v", err)
	}
	if _, err := rcv.Recv(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after own close: %v", err)
	}
	waitSessions(t, c, 0)
	waitSessions(t, s, 0)
}

// TestAbortByReceiver: a receiver that cannot go on (no room) acks what
// it stored, then aborts; the sender reads the ack, then the session's end
// with the code, and both sides free the session, the connection up.
func TestAbortByReceiver(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	for seq := uint64(1); seq <= 3; seq++ {
		if err := snd.SendData(ctx, seq, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if _, err := rcv.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcv.Ack(1); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Abort(CodeFull, "store full"); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	var acks []Ack
	for a := range snd.Acks() {
		acks = append(acks, a)
	}
	if len(acks) != 1 || acks[0].Seq != 1 {
		t.Fatalf("acks before the end: %+v, want seq 1", acks)
	}
	var remote *RemoteError
	err := snd.Err()
	if !errors.Is(err, ErrFull) || !errors.As(err, &remote) || remote.Code != CodeFull || remote.Reason != "store full" {
		t.Fatalf("sender's end: %v, want ErrFull with the reason", err)
	}
	// Data sent after the abort, before the sender read it, is dropped
	// quietly: neither connection ends.
	if err := snd.SendData(ctx, 4, nil); err == nil {
		t.Fatal("SendData after the abort succeeded")
	}
	waitSessions(t, c, 0)
	waitSessions(t, s, 0)
	if c.Err() != nil || s.Err() != nil {
		t.Fatalf("connections ended: client %v, server %v", c.Err(), s.Err())
	}
}

func TestCloseBothAtOnce(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	ctx := context.Background()
	for range 20 {
		snd, rcv := openPair(t, c, s, "orders", 10, 10)
		errs := make(chan error, 2)
		go func() { errs <- snd.Close(ctx, "a") }()
		go func() { errs <- rcv.Close(ctx, "b") }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	waitSessions(t, c, 0)
	waitSessions(t, s, 0)
	if c.Err() != nil || s.Err() != nil {
		t.Fatalf("connection died: %v / %v", c.Err(), s.Err())
	}
}

func TestClosePendingRefuses(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	ctx := context.Background()
	go func() {
		if sess, err := s.Accept(ctx); err == nil {
			_ = sess.Close(ctx, "going away")
		}
	}()
	if _, err := c.Open(ctx, "orders", 10); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "going away") {
		t.Fatalf("Open: %v", err)
	}
}

func waitSessions(t *testing.T, c *Conn, n int) {
	t.Helper()
	for range 1000 {
		if c.Stats().Sessions == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d sessions, want %d", c.Stats().Sessions, n)
}

func TestConnDeathEndsSessions(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 10, 10)
	ctx := context.Background()
	recvErr := make(chan error, 1)
	go func() {
		_, err := rcv.Recv(ctx)
		recvErr <- err
	}()
	acceptErr := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx)
		acceptErr <- err
	}()
	c.Close()
	if !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("client Err %v", c.Err())
	}
	err := waitDone(t, s)
	var remote *RemoteError
	if !errors.As(err, &remote) || remote.Code != CodeShutdown || !errors.Is(err, ErrClosed) {
		t.Fatalf("server Err %v, want the client's shutdown", err)
	}
	if err := <-recvErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv: %v", err)
	}
	if err := <-acceptErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept: %v", err)
	}
	for _, sess := range []*Session{snd, rcv} {
		<-sess.Done()
	}
	if _, ok := <-snd.Acks(); ok {
		t.Fatal("Acks open")
	}
	if err := snd.SendData(ctx, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("SendData: %v", err)
	}
	if _, err := c.Open(ctx, "orders", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Open: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
