package bench

import (
	"math/bits"
	"time"
)

// latencyHist counts durations in log-linear buckets: exact below 128 ns,
// then 128 buckets to each power of two, so a bucket is at most 1/128 of
// its value wide. The fan-out bench times every copy, eight per publish
// and as many rounds as asked: kept whole (latencies), the copies of a
// million publishes to eight subscriptions over eight rounds are 512 MB,
// in the process whose peak RSS the bench reports as the node's. A
// histogram is 57 KiB whatever it counts, and its percentiles are within
// 0.4% of the exact ones (the bucket's middle is reported; the maximum
// is exact). It is not safe for concurrent use; give each goroutine its
// own and merge.
type latencyHist struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	histSubBits = 7 // 128 buckets to a power of two
	histSub     = 1 << histSubBits
	// A duration's top 8 bits pick its bucket: the bits below them are
	// shifted out, 0 to 55 of the 63 bits of a positive int64, and each
	// shift is a row of histSub buckets past the exact first row.
	histBuckets = (63 - histSubBits + 1) * histSub
)

// bucketOf returns the bucket of d (negative durations count as 0).
func bucketOf(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return (shift+1)*histSub + int(v>>shift) - histSub
}

// bucketMid returns the middle of bucket i.
func bucketMid(i int) time.Duration {
	if i < histSub {
		return time.Duration(i)
	}
	shift := i/histSub - 1
	lo := uint64(i%histSub+histSub) << shift
	return time.Duration(lo + (uint64(1)<<shift)/2)
}

func (h *latencyHist) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

func (h *latencyHist) merge(o *latencyHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// percentiles returns the p-th percentiles (0 < p <= 100) by the
// nearest rank, as latencies.percentiles does, to the bucket; p = 100 is
// the exact maximum. Zero for an empty or nil h.
func (h *latencyHist) percentiles(ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if h == nil || h.n == 0 {
		return out
	}
	for k, p := range ps {
		if p >= 100 {
			out[k] = h.max
			continue
		}
		rank := uint64(p / 100 * float64(h.n))
		if float64(rank) < p/100*float64(h.n) {
			rank++
		}
		rank = max(rank, 1)
		var seen uint64
		for i, c := range h.counts {
			if seen += c; seen >= rank {
				out[k] = min(bucketMid(i), h.max)
				break
			}
		}
	}
	return out
}
