package petreltest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards loopback TCP connections to a target: a link whose
// speed a test sets, which it cuts, shuts as a partition would, or turns
// into a black hole. It is real TCP on both sides, so the nodes behind it
// see what a WAN does to them.
//
// A black hole reads what either side writes and forwards nothing and
// closes nothing, like a path that silently drops every packet. The
// connections it carried when it was switched on, and those it accepts
// while it is on, stay dead after it is switched off (their streams lost
// bytes); new ones are forwarded.
type Proxy struct {
	ln        net.Listener
	target    string
	toward    int // bytes a second toward target; 0 is unpaced
	back      int // bytes a second back from target; 0 is unpaced
	forwarded atomic.Int64
	hole      atomic.Bool
	refusing  atomic.Bool
	mu        sync.Mutex
	pairs     []*proxyPair
	wg        sync.WaitGroup
}

type proxyPair struct {
	in, out net.Conn
	dead    atomic.Bool // blackholed: drained, never closed by its pipes
	closed  atomic.Bool
}

// ProxyOption sets how a Proxy paces what it carries.
type ProxyOption func(*Proxy)

// Pace carries at most bps bytes a second toward the target on each
// connection, and back at most back bytes a second (0: unpaced).
func Pace(bps, back int) ProxyOption {
	return func(p *Proxy) { p.toward, p.back = bps, back }
}

// NewProxy listens on a loopback port and forwards what it accepts to
// target (host:port). It is closed, with every connection it carries,
// when the test ends.
func NewProxy(t testing.TB, target string, opts ...ProxyOption) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	for _, o := range opts {
		o(p)
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port, where nodes dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Forwarded is how many bytes the proxy has carried toward the target.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Blackhole switches the proxy to a black hole (on) or back (off).
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole.Store(on)
	if on {
		for _, pr := range p.pairs {
			pr.dead.Store(true)
		}
	}
}

// Cut closes every connection the proxy carries, mid-frame or not, and
// returns how many it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pr := range p.pairs {
		if !pr.closed.Swap(true) {
			pr.in.Close()
			pr.out.Close()
			n++
		}
	}
	// Every pair is closed now: a long run of cuts keeps none.
	clear(p.pairs)
	p.pairs = p.pairs[:0]
	return n
}

// CutLast closes the connection accepted last, of those still open, and
// reports whether there was one.
func (p *Proxy) CutLast() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.pairs) - 1; i >= 0; i-- {
		if pr := p.pairs[i]; !pr.closed.Swap(true) {
			pr.in.Close()
			pr.out.Close()
			return true
		}
	}
	return false
}

// Refuse makes the proxy close each connection as soon as it accepts it
// (on), or forward them again (off).
func (p *Proxy) Refuse(on bool) { p.refusing.Store(on) }

// Shut refuses new connections and cuts those the proxy carries (on), as
// a partition would, or lets connections through again (off).
func (p *Proxy) Shut(on bool) {
	p.Refuse(on)
	if on {
		p.Cut()
	}
}

// Close stops accepting, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, pr := range p.pairs {
		pr.in.Close()
		pr.out.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refusing.Load() {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		pr := &proxyPair{in: in, out: out}
		p.mu.Lock()
		pr.dead.Store(p.hole.Load())
		p.pairs = append(p.pairs, pr)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pr, out, in, p.toward, &p.forwarded)
		go p.pipe(pr, in, out, p.back, nil)
	}
}

// pipe copies src to dst in chunks of at most 16 KiB while pr is alive,
// sleeping after each for the time it takes at bps, and adds what it
// wrote to count. Once pr is dead it drains src without writing. When
// src ends it closes src, and dst too unless pr is dead: a black hole
// does not pass a close on either.
func (p *Proxy) pipe(pr *proxyPair, dst, src net.Conn, bps int, count *atomic.Int64) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		if !pr.dead.Load() {
			dst.Close()
			pr.closed.Store(true)
		}
	}()
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pr.dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if count != nil {
				count.Add(int64(n))
			}
			if bps > 0 {
				time.Sleep(time.Duration(n) * time.Second / time.Duration(bps))
			}
		}
		if err != nil {
			return
		}
	}
}
