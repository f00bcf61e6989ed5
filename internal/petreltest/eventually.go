package petreltest

import (
	"testing"
	"time"
)

// Patience bounds every wait of Eventually. It is generous because it is
// reached only when a test fails: on a loaded machine under the race
// detector a correct condition may take seconds to hold, and a shorter
// bound would make a slow test a flaky one.
const Patience = 30 * time.Second

// Poll intervals: the first poll comes soon, so that a condition about to
// hold costs little, and the interval grows so that a long wait does not
// spin.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// Eventually polls cond until it holds, and fails the test if it still does
// not after Patience. The failure names what was awaited, and, when state
// is given, what state reports at that moment (the queue stats, the links),
// so that the log says why. Call it from the test's goroutine: it calls
// t.Fatalf.
func Eventually(t testing.TB, what string, cond func() bool, state ...func() string) {
	t.Helper()
	if !Holds(Patience, cond) {
		t.Fatalf("not within %v: %s%s", Patience, what, describe(state))
	}
}

// Holds polls cond until it holds or within passes, and reports whether
// it held. It is for checks that report a failure in their own words, such
// as the invariant checks of nodes; tests wait with Eventually.
func Holds(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	wait := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
	}
	return true
}

// describe renders the optional state funcs of Eventually.
func describe(state []func() string) string {
	s := ""
	for _, f := range state {
		if f != nil {
			s += "\n" + f()
		}
	}
	return s
}

// Returns runs f and returns its error, failing the test if f has not
// returned within d: for a call that must not block, such as an open that
// a named pipe would hold for ever. f runs on a goroutine of its own,
// which a call that never returns leaves behind; the test has failed by
// then.
func Returns(t testing.TB, what string, d time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
		return nil
	}
}
