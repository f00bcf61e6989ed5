package bench

import (
	"sync"
	"time"
)

// slowCommit is the commit time past which a commit counts as slow in the
// link bench's figures: the latency target of `bench link --rate` is 10
// ms, and a commit that takes longer holds every message it carries past
// it.
const slowCommit = 10 * time.Millisecond

// commitWatch records an agent's node's group commits: how many there
// were, the longest and how many took longer than slowCommit. The fsync
// probe before a run gives the disk's median; this shows its stalls
// during the run, which is what a tail latency meets.
type commitWatch struct {
	mu      sync.Mutex
	commits int64
	slow    int64
	max     time.Duration
}

// agentCommits is the watch of this process's node: an agent hosts one.
var agentCommits commitWatch

// WatchCommits returns the store's commit hook that feeds this agent's
// commit figures, then calls next, the hook already set, if any.
func WatchCommits(next func(requests int, took time.Duration)) func(requests int, took time.Duration) {
	return agentCommits.hook(next)
}

func (w *commitWatch) hook(next func(requests int, took time.Duration)) func(requests int, took time.Duration) {
	return func(requests int, took time.Duration) {
		w.add(took)
		if next != nil {
			next(requests, took)
		}
	}
}

func (w *commitWatch) add(took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.commits++
	if took > slowCommit {
		w.slow++
	}
	w.max = max(w.max, took)
}

// commitFigures are an agent's commit figures, as its events carry them.
type commitFigures struct {
	Commits     int64   `json:"commits"`
	SlowCommits int64   `json:"slow_commits"`
	CommitMaxMs float64 `json:"commit_max_ms"`
}

func (w *commitWatch) figures() commitFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	return commitFigures{Commits: w.commits, SlowCommits: w.slow, CommitMaxMs: round(ms(w.max), 3)}
}
