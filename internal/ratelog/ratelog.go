// Package ratelog holds back repeated log lines: one line per key (a
// peer, a reason) per period gets through, and the lines held back are
// counted, so that a peer that repeats a fault cannot flood the log.
//
// Memory is bounded: once more than pruneAbove keys are held, the keys
// whose period has ended are forgotten; only keys that logged within the
// last period stay. It imports nothing of Petrel.
package ratelog

import (
	"sync"
	"time"
)

// DefaultEvery is the period of a Limiter whose Every is zero.
const DefaultEvery = time.Minute

// pruneAbove is how many keys a Limiter holds before it forgets those
// whose period ended. Below it nothing is forgotten, so that a few
// recurring keys keep their count of lines held back.
const pruneAbove = 256

// Limiter lets one line per key through every period. The zero Limiter
// lets one through per key per DefaultEvery, on the wall clock. It is safe
// for concurrent use; its fields must not change once it is used.
type Limiter struct {
	// Every is the period (DefaultEvery when zero).
	Every time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu   sync.Mutex
	keys map[string]*state
}

type state struct {
	last time.Time // when the last line got through
	held int64     // lines held back since
}

// Allow reports whether a line for key may be logged now and, if so, how
// many were held back since the last one.
func (l *Limiter) Allow(key string) (held int64, ok bool) {
	every, t := clock(l.Every, l.Now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*state{}
	}
	s, seen := l.keys[key]
	if seen && t.Sub(s.last) < every {
		s.held++
		return 0, false
	}
	if !seen {
		l.prune(t, every)
		s = &state{}
		l.keys[key] = s
	}
	held, s.last, s.held = s.held, t, 0
	return held, true
}

// prune forgets the keys whose period ended, once there are too many.
// l.mu is held.
func (l *Limiter) prune(t time.Time, every time.Duration) {
	if len(l.keys) < pruneAbove {
		return
	}
	for k, s := range l.keys {
		if t.Sub(s.last) >= every {
			delete(l.keys, k)
		}
	}
}

// Len returns how many keys the Limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// Budget lets at most Lines lines through per period, whatever their
// keys: a Limiter bounds the lines of each key, and a Budget in front of
// it bounds those of keys without end (a flood of invented node names).
// The zero Budget lets nothing through; it is safe for concurrent use,
// and its fields must not change once it is used.
type Budget struct {
	// Lines is how many lines get through per period.
	Lines int
	// Every is the period (DefaultEvery when zero).
	Every time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	start time.Time // of the current period
	used  int       // lines let through in it
	held  int64     // lines held back since the last one let through
}

// Allow reports whether a line may be logged now and, if so, how many
// were held back since the last one.
func (b *Budget) Allow() (held int64, ok bool) {
	every, t := clock(b.Every, b.Now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.Sub(b.start) >= every {
		b.start, b.used = t, 0
	}
	if b.used >= b.Lines {
		b.held++
		return 0, false
	}
	b.used++
	held, b.held = b.held, 0
	return held, true
}

// clock returns every, DefaultEvery when it is not positive, and the time
// now by now, time.Now when nil: the defaults of Limiter and Budget.
func clock(every time.Duration, now func() time.Time) (time.Duration, time.Time) {
	if every <= 0 {
		every = DefaultEvery
	}
	if now == nil {
		now = time.Now
	}
	return every, now()
}
