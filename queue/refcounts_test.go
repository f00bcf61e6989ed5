package queue

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestRefCountsAgreeWithAMap drives refCounts as the writer does (new
// bodies at rising ids, each counted 2–9, acks that count them down
// mostly in id order, some bodies left behind for long, rollbacks that
// set older counts back) beside a plain map, and checks they agree after
// every step: get for every id touched, len and all. The window is kept
// small, so that the stragglers spill into the map many times.
func TestRefCountsAgreeWithAMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		// Bodies counted at open, below the first new id.
		want := map[int64]int32{}
		old := map[int64]int32{}
		for range rng.IntN(50) {
			body := int64(1 + rng.IntN(1000))
			old[body], want[body] = 3, 3
		}
		r := newRefCounts(old, 1001)
		var live []int64
		for body := range want {
			live = append(live, body)
		}
		set := func(body int64, n int32) {
			r.set(body, n)
			if n > 1 {
				want[body] = n
			} else {
				delete(want, body)
			}
		}
		next := int64(1001 + rng.IntN(1000))
		for step := range 20000 {
			switch op := rng.IntN(10); {
			case op < 4: // a publish: its body, then its copies' ids
				body := next
				set(body, int32(2+rng.IntN(8)))
				live = append(live, body)
				next += int64(1 + rng.IntN(12))
				if rng.IntN(50) == 0 {
					next += int64(rng.IntN(3 * maxRefWindow)) // a long stretch of other ids
				}
			case op < 9 && len(live) > 0: // an ack, mostly of an old body
				i := 0
				if rng.IntN(4) == 0 {
					i = rng.IntN(len(live))
				}
				body := live[i]
				n := r.get(body)
				set(body, n-1)
				if n-1 <= 1 {
					live = append(live[:i], live[i+1:]...)
				}
			case len(live) > 0: // a rollback sets a count back, maybe of a body dropped
				body := live[rng.IntN(len(live))]
				set(body, r.get(body)+1)
			}
			for _, body := range []int64{next - 1, next, next + 1} {
				if got, w := r.get(body), max(want[body], 1); got != w {
					t.Fatalf("seed %d step %d: get(%d) = %d, want %d", seed, step, body, got, w)
				}
			}
			if step%500 == 0 || step == 19999 {
				if r.len() != len(want) {
					t.Fatalf("seed %d step %d: len %d, want %d", seed, step, r.len(), len(want))
				}
				got := maps.Collect(r.all())
				if !maps.Equal(got, want) {
					t.Fatalf("seed %d step %d: all() holds %d bodies, want %d", seed, step, len(got), len(want))
				}
				for body, n := range want {
					if r.get(body) != n {
						t.Fatalf("seed %d step %d: get(%d) = %d, want %d", seed, step, body, r.get(body), n)
					}
				}
				if len(r.win) > maxRefWindow {
					t.Fatalf("seed %d step %d: the window holds %d ids, more than %d", seed, step, len(r.win), maxRefWindow)
				}
			}
		}
	}
}
