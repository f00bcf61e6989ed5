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
	if err := poll(Patience, cond); err != nil {
		t.Fatalf("not within %v: %s%s", Patience, what, describe(state))
	}
}

// errTimeout is returned by poll when its bound passed.
type errTimeout struct{}

func (errTimeout) Error() string { return "timed out" }

// poll calls cond until it holds or within passes.
func poll(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	wait := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			return errTimeout{}
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
	}
	return nil
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
