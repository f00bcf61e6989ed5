package petreltest

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the
// test, so that the failure of Eventually can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		Eventually(t, "the third call", func() bool { calls++; return calls == 3 })
		if calls != 3 {
			t.Fatalf("cond called %d times, want 3", calls)
		}
		if waited := time.Since(start); waited >= maxPoll {
			t.Fatalf("waited %v on the fake clock for a condition that held at the third poll", waited)
		}
	})
}

func TestEventuallyFailsWithWhatAndState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		start := time.Now()
		Eventually(r, "the queue to drain", func() bool { return false }, func() string { return "depth 3" })
		if time.Since(start) < Patience {
			t.Fatalf("gave up after %v, before Patience", time.Since(start))
		}
		if !strings.Contains(r.failed, "the queue to drain") || !strings.Contains(r.failed, "depth 3") {
			t.Fatalf("failure %q does not say what was awaited and the state", r.failed)
		}
	})
}
