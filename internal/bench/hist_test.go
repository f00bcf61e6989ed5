package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Every duration falls in a bucket whose middle is within 1/256 of it,
// and the buckets are in order.
func TestHistBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	last := -1
	for _, d := range []time.Duration{0, 1, 127, 128, 129, 255, 256, 257, 1000, time.Millisecond, time.Hour, 1<<63 - 1} {
		i := bucketOf(d)
		if i < last || i >= histBuckets {
			t.Fatalf("bucket of %v: %d after %d (of %d)", d, i, last, histBuckets)
		}
		last = i
	}
	if last != histBuckets-1 {
		t.Fatalf("the longest duration in bucket %d of %d: the array is not its size", last, histBuckets)
	}
	for range 100_000 {
		d := time.Duration(r.Int64N(int64(10 * time.Second)))
		mid := bucketMid(bucketOf(d))
		if diff := (mid - d).Abs(); diff > d/256+1 {
			t.Fatalf("%v in the bucket of middle %v: off by %v", d, mid, diff)
		}
	}
}

// The histogram's percentiles are within 0.4% of the exact ones over
// spread-out durations, its maximum is exact, and merging two halves
// gives what counting all in one does.
func TestHistPercentiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var exact latencies
	var a, b, all latencyHist
	for i := range 200_000 {
		d := time.Duration(r.ExpFloat64() * float64(20*time.Millisecond))
		exact = append(exact, d)
		all.add(d)
		if i%2 == 0 {
			a.add(d)
		} else {
			b.add(d)
		}
	}
	a.merge(&b)
	if a != all {
		t.Fatal("merged halves differ from one histogram of all")
	}
	ps := []float64{1, 50, 90, 99, 99.9, 100}
	want := exact.percentiles(ps...)
	got := all.percentiles(ps...)
	for i, p := range ps {
		if diff := (got[i] - want[i]).Abs(); diff > want[i]/256+1 {
			t.Errorf("p%v = %v, exact %v", p, got[i], want[i])
		}
	}
	if got[len(ps)-1] != want[len(ps)-1] {
		t.Errorf("max %v, exact %v", got[len(ps)-1], want[len(ps)-1])
	}
	for _, h := range []*latencyHist{new(latencyHist), nil} {
		if got := h.percentiles(50, 100); got[0] != 0 || got[1] != 0 {
			t.Errorf("empty or nil: %v", got)
		}
	}
}
