package acceptretry

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// scripted is a listener whose Accept returns its errors in turn, then
// the connections of a real listener.
type scripted struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (s *scripted) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	return s.Listener.Accept()
}

// acceptErr is an error as net's TCPListener.Accept returns it.
func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Errors that pass are retried, each after a wait that doubles from 5 ms
// up to 1 s, and Accept then returns the connection that comes; the next
// run of errors starts again at 5 ms.
func TestRetriesWhatPasses(t *testing.T) {
	inner := loopback(t)
	var errs []error
	for range 10 {
		errs = append(errs, acceptErr(syscall.EMFILE))
	}
	errs = append(errs, acceptErr(syscall.ENFILE), acceptErr(syscall.ENOBUFS), acceptErr(syscall.ENOMEM), acceptErr(syscall.ECONNABORTED))
	s := &scripted{Listener: inner, errs: errs}
	var retried []time.Duration
	l := New(s, func(_ error, wait time.Duration) { retried = append(retried, wait) })
	// The clock: each wait is noted, and over at once.
	var waited []time.Duration
	l.after = func(d time.Duration) <-chan time.Time {
		waited = append(waited, d)
		ch := make(chan time.Time, 1)
		ch <- time.Now()
		return ch
	}
	dial := func() {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	dial()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept: %v, want the connection after the errors", err)
	}
	c.Close()
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000, 1000, 1000}
	if len(waited) != len(want) || len(retried) != len(want) {
		t.Fatalf("waited %v, told of %v; want %d waits", waited, retried, len(want))
	}
	for i, w := range want {
		if waited[i] != w*time.Millisecond || retried[i] != waited[i] {
			t.Errorf("wait %d: %v, told %v; want %v", i, waited[i], retried[i], w*time.Millisecond)
		}
	}
	if l.Err() != nil {
		t.Errorf("Err %v while it serves", l.Err())
	}
	// A new run of errors starts again at the first wait.
	s.mu.Lock()
	s.errs = []error{acceptErr(syscall.EMFILE)}
	s.mu.Unlock()
	waited = nil
	dial()
	if c, err := l.Accept(); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	if len(waited) != 1 || waited[0] != MinWait {
		t.Errorf("waits %v, want one of %v", waited, MinWait)
	}
}

// The waits are real ones by default: three errors take 5+10+20 ms.
func TestWaitsForReal(t *testing.T) {
	inner := loopback(t)
	l := New(&scripted{Listener: inner, errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE)}}, nil)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	ac, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ac.Close()
	if took := time.Since(start); took < 35*time.Millisecond {
		t.Errorf("three errors retried in %v, want at least 35ms", took)
	}
}

// An error that does not pass is returned at once, and Err keeps it: the
// listener serves no more.
func TestReturnsWhatLasts(t *testing.T) {
	boom := errors.New("the socket is gone")
	s := &scripted{Listener: loopback(t), errs: []error{acceptErr(syscall.EMFILE), boom}}
	retried := 0
	l := New(s, func(error, time.Duration) { retried++ })
	if _, err := l.Accept(); !errors.Is(err, boom) {
		t.Fatalf("Accept: %v, want %v", err, boom)
	}
	if retried != 1 {
		t.Errorf("%d errors retried, want 1", retried)
	}
	if !errors.Is(l.Err(), boom) {
		t.Errorf("Err %v, want %v", l.Err(), boom)
	}
	// The listener closed under it, by another hand: the same.
	s2 := &scripted{Listener: loopback(t)}
	l2 := New(s2, nil)
	s2.Listener.Close()
	if _, err := l2.Accept(); !errors.Is(err, net.ErrClosed) || !errors.Is(l2.Err(), net.ErrClosed) {
		t.Fatalf("Accept %v, Err %v; want net.ErrClosed from both", err, l2.Err())
	}
}

// Close ends an Accept that waits to try again, and an Accept ended by
// Close leaves Err nil.
func TestCloseEndsTheWait(t *testing.T) {
	var errs []error
	for range 100 {
		errs = append(errs, acceptErr(syscall.EMFILE))
	}
	l := New(&scripted{Listener: loopback(t), errs: errs}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond) // into the waits of a second
	start := time.Now()
	l.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Accept returned a connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Accept returned %v after Close", took)
	}
	if l.Err() != nil {
		t.Errorf("Err %v after Close, want nil", l.Err())
	}
	// Once closed, even an error that passes is returned at once.
	if _, err := l.Accept(); err == nil || l.Err() != nil {
		t.Errorf("Accept after Close: %v, Err %v", err, l.Err())
	}
}

func TestTemporary(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{acceptErr(syscall.EMFILE), true},
		{acceptErr(syscall.ENFILE), true},
		{acceptErr(syscall.ENOBUFS), true},
		{acceptErr(syscall.ENOMEM), true},
		{acceptErr(syscall.ECONNABORTED), true},
		{acceptErr(syscall.EPROTO), true},
		{acceptErr(syscall.EHOSTUNREACH), true},
		{acceptErr(syscall.EINVAL), false},
		{acceptErr(syscall.EBADF), false},
		{&net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}, false},
		{errors.New("other"), false},
		{fmt.Errorf("wrapped: %w", syscall.EMFILE), true},
		{os.ErrDeadlineExceeded, true},
	} {
		if got := Temporary(tc.err); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
