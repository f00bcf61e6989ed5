package ratelog

import (
	"fmt"
	"testing"
	"time"
)

func TestHoldsBackAndCounts(t *testing.T) {
	now := time.Unix(1000, 0)
	l := Limiter{Every: 10 * time.Second, Now: func() time.Time { return now }}
	if n, ok := l.Allow("x"); !ok || n != 0 {
		t.Fatalf("first line: %d %v", n, ok)
	}
	for range 5 {
		if _, ok := l.Allow("x"); ok {
			t.Fatal("a second line within the period")
		}
	}
	if _, ok := l.Allow("y"); !ok {
		t.Fatal("another key was held back")
	}
	now = now.Add(10 * time.Second)
	if n, ok := l.Allow("x"); !ok || n != 5 {
		t.Fatalf("after the period: %d %v, want 5 held back", n, ok)
	}
}

func TestZeroLimiterIsOncePerMinute(t *testing.T) {
	now := time.Unix(1000, 0)
	l := Limiter{Now: func() time.Time { return now }}
	l.Allow("x")
	now = now.Add(DefaultEvery - time.Second)
	if _, ok := l.Allow("x"); ok {
		t.Fatal("a second line within a minute")
	}
	now = now.Add(time.Second)
	if _, ok := l.Allow("x"); !ok {
		t.Fatal("no line after a minute")
	}
}

// TestForgetsEndedKeys: a flood of distinct keys does not grow the
// Limiter past the keys of one period.
func TestForgetsEndedKeys(t *testing.T) {
	now := time.Unix(1000, 0)
	l := Limiter{Every: time.Second, Now: func() time.Time { return now }}
	for i := range 10 * pruneAbove {
		if i%100 == 0 {
			now = now.Add(time.Second)
		}
		l.Allow(fmt.Sprint("peer-", i))
	}
	if n := l.Len(); n > pruneAbove+100 {
		t.Fatalf("%d keys held, want at most %d", n, pruneAbove+100)
	}
}

func TestBudget(t *testing.T) {
	now := time.Unix(0, 0)
	b := &Budget{Lines: 2, Every: time.Minute, Now: func() time.Time { return now }}
	for i, want := range []bool{true, true, false, false} {
		if _, ok := b.Allow(); ok != want {
			t.Fatalf("line %d: %v, want %v", i, ok, want)
		}
	}
	now = now.Add(time.Minute)
	if held, ok := b.Allow(); !ok || held != 2 {
		t.Fatalf("after the period: %d held, %v; want 2, true", held, ok)
	}
}
