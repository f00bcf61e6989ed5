package bench

import (
	"testing"
	"time"
)

// TestCommitWatch: every commit counts, those over slowCommit count as
// slow, the longest is kept, and the hook already set still runs.
func TestCommitWatch(t *testing.T) {
	var w commitWatch
	var seen []int
	hook := w.hook(func(requests int, _ time.Duration) { seen = append(seen, requests) })
	for i, took := range []time.Duration{time.Millisecond, slowCommit, slowCommit + time.Microsecond, 250 * time.Millisecond} {
		hook(i+1, took)
	}
	got := w.figures()
	if got != (commitFigures{Commits: 4, SlowCommits: 2, CommitMaxMs: 250}) {
		t.Fatalf("figures %+v, want 4 commits, 2 slow, the longest 250 ms", got)
	}
	if len(seen) != 4 || seen[3] != 4 {
		t.Fatalf("the hook before saw %v, want every commit", seen)
	}
	w.hook(nil)(1, time.Millisecond) // no hook before: nothing to call
	if got := w.figures().Commits; got != 5 {
		t.Fatalf("%d commits, want 5", got)
	}
}
