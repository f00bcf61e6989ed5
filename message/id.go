package message

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Message ids are
//
//	id = unixMilli<<20 | sequence
//
// 44 bits of milliseconds (enough until the year 2527) and a 20-bit sequence
// (a million ids per millisecond before the ids run ahead of the clock,
// which is harmless). Ids sort by creation time, so they also order a
// node's messages in logs and stores.
const (
	idSeqBits = 20
	idMaxMs   = 1<<(64-idSeqBits) - 1
)

// defaultIDWindow is how far ahead IDGen reserves when no window is given:
// one durable write per ten seconds of ids keeps reservation cost out of the
// send path, while a restart skips at most ten seconds' worth of ids.
const defaultIDWindow = 10 * time.Second

// errIDsExhausted can only happen with a corrupt floor near 2^64.
var errIDsExhausted = errors.New("message ids exhausted: the persisted id floor is at its maximum")

// IDGen issues message ids that are strictly increasing on one node, across
// restarts and when the wall clock steps backwards.
//
// Next returns max(now<<20, last+1), so within one run ids never repeat or
// go back whatever the clock does. Across restarts the clock alone is not
// enough (it may have stepped back while the node was down), so IDGen keeps
// a durable high-water mark: before it issues an id above the current
// reservation it calls reserve with a new mark a window ahead, and issues
// ids only up to a mark that reserve has made durable. After a restart,
// NewIDGen takes the last persisted mark as its floor and issues only ids
// above it, so it can never reissue an id from before the crash.
//
// IDGen is safe for concurrent use. Next holds its lock across reserve, so
// callers wait for the durable write about once per window, never more.
type IDGen struct {
	mu       sync.Mutex
	last     uint64 // last id issued, or the floor before the first one
	reserved uint64 // ids up to this one are durably reserved
	window   uint64 // ids reserved per call of reserve
	reserve  func(upTo uint64) error
	now      func() time.Time
}

// NewIDGen returns a generator whose ids are all above floor, the last
// high-water mark reserve persisted (0 on a node's first start).
//
// reserve must make upTo durable before it returns (write, fsync, rename); it
// may be nil for ids that need not survive a restart. window is how much
// clock time one reservation covers; 0 or less means 10s. now defaults to
// time.Now; tests inject their own clock.
func NewIDGen(floor uint64, window time.Duration, reserve func(upTo uint64) error, now func() time.Time) *IDGen {
	if window <= 0 {
		window = defaultIDWindow
	}
	if now == nil {
		now = time.Now
	}
	return &IDGen{
		last:     floor,
		reserved: floor,
		window:   max(min(uint64(window/time.Millisecond), idMaxMs), 1) << idSeqBits,
		reserve:  reserve,
		now:      now,
	}
}

// Next returns the next id. It fails only when reserve fails; then no id is
// issued, and a later call tries to reserve again.
func (g *IDGen) Next() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == math.MaxUint64 {
		return 0, errIDsExhausted
	}
	id := max(clockID(g.now()), g.last+1)
	if id > g.reserved {
		upTo := id + g.window
		if upTo < id {
			upTo = math.MaxUint64
		}
		if g.reserve != nil {
			if err := g.reserve(upTo); err != nil {
				return 0, fmt.Errorf("reserve message ids up to %d: %w", upTo, err)
			}
		}
		g.reserved = upTo
	}
	g.last = id
	return id, nil
}

// clockID is the smallest id of the millisecond t falls in. A clock before
// 1970 counts as 1970; one past 2527 sticks there.
func clockID(t time.Time) uint64 {
	ms := t.UnixMilli()
	if ms <= 0 {
		return 0
	}
	return uint64(min(ms, idMaxMs)) << idSeqBits
}

// IDTime returns the millisecond in which id was issued, in UTC. Ids issued
// faster than a million per millisecond, or after the clock stepped back,
// carry a time a little later than the real one.
func IDTime(id uint64) time.Time {
	return time.UnixMilli(int64(id >> idSeqBits)).UTC()
}
