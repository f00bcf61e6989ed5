package message_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// store is a stand-in for the durable high-water mark: reserve "persists"
// upTo, and records every call.
type store struct {
	mu       sync.Mutex
	mark     uint64
	calls    int
	failWith error
}

func (s *store) reserve(upTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failWith != nil {
		return s.failWith
	}
	if upTo <= s.mark {
		return errors.New("reservation went backwards")
	}
	s.mark = upTo
	return nil
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time           { return c.t }
func (c *clock) step(d time.Duration)     { c.t = c.t.Add(d) }
func (s *store) persisted() (uint64, int) { s.mu.Lock(); defer s.mu.Unlock(); return s.mark, s.calls }

func TestIDGenIncreasing(t *testing.T) {
	var s store
	g := message.NewIDGen(0, 0, s.reserve, nil)
	var last uint64
	for i := range 100_000 {
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("call %d: id %d after %d", i, id, last)
		}
		if mark, _ := s.persisted(); id > mark {
			t.Fatalf("id %d issued beyond the persisted mark %d", id, mark)
		}
		last = id
	}
	// The real clock advances by far less than 10s here, so reserve ran
	// about once, not once per id.
	if _, calls := s.persisted(); calls < 1 || calls > 3 {
		t.Fatalf("reserve called %d times for 1e5 ids", calls)
	}
	if d := time.Since(message.IDTime(last)); d < 0 || d > time.Minute {
		t.Fatalf("IDTime of the last id is %v from now", d)
	}
}

func TestIDGenClockStepsBackwards(t *testing.T) {
	c := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := message.NewIDGen(0, time.Second, nil, c.now)
	first, _ := g.Next()
	if got := message.IDTime(first); !got.Equal(c.t) {
		t.Fatalf("IDTime(first) = %v, want %v", got, c.t)
	}
	last := first
	for _, step := range []time.Duration{time.Millisecond, -time.Hour, 0, -time.Millisecond, 2 * time.Hour, -24 * time.Hour} {
		c.step(step)
		for range 1000 {
			id, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("after a step of %v: id %d after %d", step, id, last)
			}
			last = id
		}
	}
}

// A generator rebuilt from the persisted mark never reissues an id, even
// when the clock went back while the node was down.
func TestIDGenRestart(t *testing.T) {
	var s store
	c := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	var issued uint64
	for run := range 5 {
		floor, _ := s.persisted()
		g := message.NewIDGen(floor, time.Second, s.reserve, c.now)
		for range 3000 {
			id, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			if id <= issued {
				t.Fatalf("run %d: id %d not above %d issued before the restart", run, id, issued)
			}
			issued = id
			c.step(time.Millisecond / 2)
		}
		c.step(-10 * time.Minute) // the clock steps back while "down"
	}
}

func TestIDGenReserveWindow(t *testing.T) {
	var s store
	c := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := message.NewIDGen(0, time.Second, s.reserve, c.now)
	for range 10_000 { // 10 s of clock, one id per millisecond
		if _, err := g.Next(); err != nil {
			t.Fatal(err)
		}
		c.step(time.Millisecond)
	}
	if _, calls := s.persisted(); calls != 10 {
		t.Fatalf("reserve called %d times over 10s with a 1s window, want 10", calls)
	}
}

func TestIDGenReserveError(t *testing.T) {
	boom := errors.New("disk full")
	s := store{}
	c := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := message.NewIDGen(0, time.Second, s.reserve, c.now)
	before, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	c.step(2 * time.Second) // past the reservation
	s.failWith = boom
	if id, err := g.Next(); !errors.Is(err, boom) || id != 0 {
		t.Fatalf("Next = %d, %v; want 0 and the reserve error", id, err)
	}
	s.failWith = nil
	after, err := g.Next()
	if err != nil || after <= before {
		t.Fatalf("after recovery Next = %d, %v (before: %d)", after, err, before)
	}
	if mark, _ := s.persisted(); after > mark {
		t.Fatalf("id %d beyond the persisted mark %d", after, mark)
	}
}

func TestIDGenExhausted(t *testing.T) {
	g := message.NewIDGen(math.MaxUint64-1, 0, nil, nil)
	if id, err := g.Next(); err != nil || id != math.MaxUint64 {
		t.Fatalf("Next = %d, %v", id, err)
	}
	if _, err := g.Next(); err == nil {
		t.Fatal("Next past the largest id did not fail")
	}
}

func TestIDGenConcurrent(t *testing.T) {
	var s store
	g := message.NewIDGen(0, 0, s.reserve, nil)
	const workers, each = 8, 5000
	ids := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]bool, workers*each)
	for w := range ids {
		for i, id := range ids[w] {
			if seen[id] {
				t.Fatalf("id %d issued twice", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[w][i-1] {
				t.Fatalf("worker %d saw id %d after %d", w, id, ids[w][i-1])
			}
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d unique ids, want %d", len(seen), workers*each)
	}
}

func TestIDTime(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	id := uint64(at.UnixMilli())<<20 | 12345
	if got := message.IDTime(id); !got.Equal(at) || got.Location() != time.UTC {
		t.Fatalf("IDTime = %v, want %v", got, at)
	}
}
