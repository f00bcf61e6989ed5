// Package acceptretry keeps a listener accepting through errors that
// pass: out of file descriptors (EMFILE, ENFILE), out of buffers or
// memory (ENOBUFS, ENOMEM), a connection aborted or reset before it was
// accepted, and the network errors Linux's accept(2) passes on from a
// pending connection. A server loop that gives up at the first Accept
// error, as mochi's listeners do, would stop accepting for good after a
// moment of descriptor exhaustion, with the port still bound: the kernel
// queues new connections that nothing ever takes.
//
// Listener retries those errors in Accept itself, after a wait that
// starts at 5 ms and doubles up to 1 s, as net/http's Server does, and
// returns only the others, and those after Close. It imports nothing of
// Petrel.
package acceptretry

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The waits between two Accepts after an error that passes: the first,
// and the most, as net/http's.
const (
	MinWait = 5 * time.Millisecond
	MaxWait = time.Second
)

// Listener is a net.Listener whose Accept retries the errors that pass
// (Temporary) until it accepts a connection, the error is another, or the
// Listener is closed.
type Listener struct {
	net.Listener
	// retry is told of each error retried, with the wait before the next
	// Accept: to log it and count it.
	retry func(err error, wait time.Duration)
	// after is time.After, which tests replace.
	after func(time.Duration) <-chan time.Time

	done chan struct{} // closed by Close
	once sync.Once
	err  atomic.Pointer[error] // the error that ended Accept, not after Close
}

// New wraps ln. retry, if not nil, is called on each error retried, with
// the wait before the next Accept; it must not block.
func New(ln net.Listener, retry func(err error, wait time.Duration)) *Listener {
	return &Listener{Listener: ln, retry: retry, after: time.After, done: make(chan struct{})}
}

// Accept waits for the next connection, through the errors that pass.
// The wait between two tries starts again at MinWait with each call.
func (l *Listener) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if l.closed() {
			return nil, err
		}
		if !Temporary(err) {
			l.err.CompareAndSwap(nil, &err)
			return nil, err
		}
		wait = min(max(2*wait, MinWait), MaxWait)
		if l.retry != nil {
			l.retry(err, wait)
		}
		select {
		case <-l.after(wait):
		case <-l.done:
			return nil, err
		}
	}
}

// Close closes the listener, and ends an Accept waiting to try again.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Err returns the error that ended Accept other than by Close: the
// listener no longer accepts anything. Nil while it serves, and once it
// was closed by Close.
func (l *Listener) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// passing are the errors of accept(2) that say nothing of the listening
// socket itself: it accepts again once they pass. Linux's accept(2)
// returns the network errors of a connection that failed in the backlog
// (ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN, EHOSTUNREACH, EOPNOTSUPP,
// ENETUNREACH, and ENONET, which not every system defines), and its man
// page asks that they be retried like EAGAIN; EPERM is a firewall's
// refusal of one connection.
var passing = []syscall.Errno{
	syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
	syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.ETIMEDOUT,
	syscall.EPERM, syscall.EPROTO, syscall.ENETDOWN, syscall.ENETUNREACH, syscall.ENOPROTOOPT,
	syscall.EHOSTDOWN, syscall.EHOSTUNREACH, syscall.EOPNOTSUPP,
}

// Temporary reports whether err, from Accept, passes: the listener
// accepts again later. A timeout (a deadline set on the listener) passes
// too; net.ErrClosed does not.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		for _, e := range passing {
			if errno == e {
				return true
			}
		}
		return errno == enonet
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
