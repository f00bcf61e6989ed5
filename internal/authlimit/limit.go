package authlimit

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Limiter's zero fields.
const (
	// DefaultBurst failed checks an address may make at once; then one
	// more every DefaultEvery (10 a minute).
	DefaultBurst = 10
	DefaultEvery = 6 * time.Second
	// DefaultMaxKeys addresses are counted apart; past them, together.
	DefaultMaxKeys = 4096
)

// sweepEvery is how often, at most, a full table is swept of the
// addresses whose count has drained: a full table costs one sweep a
// second, not one per request.
const sweepEvery = time.Second

// Limiter counts failed checks per remote address, as a leaky bucket: each
// failure adds Every to the address's debt, which drains in real time; an
// address whose debt is past (Burst-1)×Every may not be checked again
// until it drains below. An IPv6 address counts by its /64, which one
// host usually holds whole. Allow and Fail are apart, so checks made at
// once may overshoot the burst; but each failure adds to the debt, so over
// time an address still gets one guess per Every. Its methods are safe
// for concurrent use; the zero Limiter uses the defaults.
type Limiter struct {
	Burst   int
	Every   time.Duration
	MaxKeys int
	// Now is the clock, time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// until is when each address's debt is paid: the later, the more
	// recent failures it had.
	until     map[netip.Prefix]time.Time
	shared    time.Time // the debt of the addresses without room in until
	lastSweep time.Time

	refused atomic.Int64
}

// Allow reports whether remote (an "ip:port", as http.Request.RemoteAddr,
// or a bare IP) may have a secret checked now; if not, how long until it
// may. Each refusal is counted (Refused).
func (l *Limiter) Allow(remote string) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	until := l.debt(keyOf(remote))
	l.mu.Unlock()
	// The zero time is far enough back that the difference saturates:
	// clamp it before the subtraction, which would overflow.
	wait := max(until.Sub(now), 0) - time.Duration(l.burst()-1)*l.every()
	if wait <= 0 {
		return 0, true
	}
	l.refused.Add(1)
	return wait, false
}

// Fail counts a failed check of remote's secret.
func (l *Limiter) Fail(remote string) {
	now := l.now()
	k := keyOf(remote)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until == nil {
		l.until = map[netip.Prefix]time.Time{}
	}
	if _, ok := l.until[k]; !ok && len(l.until) >= l.maxKeys() {
		l.sweep(now)
	}
	if _, ok := l.until[k]; ok || len(l.until) < l.maxKeys() {
		l.until[k] = later(l.until[k], now).Add(l.every())
		return
	}
	l.shared = later(l.shared, now).Add(l.every())
}

// Refused returns how many checks Allow refused.
func (l *Limiter) Refused() int64 { return l.refused.Load() }

// Len returns how many addresses are counted apart.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.until)
}

// debt returns when k's debt is paid: its own, or the shared one when it
// has none and the table is full.
func (l *Limiter) debt(k netip.Prefix) time.Time {
	if t, ok := l.until[k]; ok {
		return t
	}
	if len(l.until) >= l.maxKeys() {
		return l.shared
	}
	return time.Time{}
}

// sweep drops the addresses whose debt is paid, at most once a second.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for k, t := range l.until {
		if !t.After(now) {
			delete(l.until, k)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// keyOf is the address remote is counted by: its IP, or the /64 of an
// IPv6 one; the zero prefix for what does not parse, which then shares
// one count.
func keyOf(remote string) netip.Prefix {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Limiter) burst() int {
	if l.Burst <= 0 {
		return DefaultBurst
	}
	return l.Burst
}

func (l *Limiter) every() time.Duration {
	if l.Every <= 0 {
		return DefaultEvery
	}
	return l.Every
}

func (l *Limiter) maxKeys() int {
	if l.MaxKeys <= 0 {
		return DefaultMaxKeys
	}
	return l.MaxKeys
}
