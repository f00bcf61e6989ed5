package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// The figures every bench reports, and how they are measured. Each bench
// (local, and later link, file, client) fills its own result struct and
// prints it with writeJSON or writeFigures.

// latencies collects durations, all of them: at 8 bytes each, a run of a
// million costs 8 MB, and exact percentiles beat a sketch's error bars.
// It is not safe for concurrent use; give each goroutine its own and merge.
type latencies []time.Duration

// merge returns all the latencies of ls in one slice.
func merge(ls ...latencies) latencies {
	var n int
	for _, l := range ls {
		n += len(l)
	}
	all := make(latencies, 0, n)
	for _, l := range ls {
		all = append(all, l...)
	}
	return all
}

// percentiles sorts l in place and returns its p-th percentiles (0 < p <=
// 100) by the nearest-rank method; zero for an empty l.
func (l latencies) percentiles(ps ...float64) []time.Duration {
	slices.Sort(l)
	out := make([]time.Duration, len(ps))
	if len(l) == 0 {
		return out
	}
	for i, p := range ps {
		rank := int(p / 100 * float64(len(l)))
		if float64(rank) < p/100*float64(len(l)) {
			rank++ // ceil: the nearest rank is the smallest covering p%
		}
		out[i] = l[min(max(rank, 1), len(l))-1]
	}
	return out
}

// ms converts d to milliseconds, the unit of every latency in the JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate returns n per second over d; zero for an empty d.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// writeJSON writes v as one JSON object on one line: the only thing a
// bench writes to stdout with --json, so scripts can parse it whole.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// figure is one line of a bench's human output.
type figure struct {
	name  string
	value string
}

// writeFigures writes one aligned "name  value" line per figure.
func writeFigures(w io.Writer, figs []figure) error {
	width := 0
	for _, f := range figs {
		width = max(width, len(f.name))
	}
	for _, f := range figs {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width, f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

// round keeps figures readable in JSON: 2 decimals for rates and sizes, 3
// for milliseconds.
func round(x float64, decimals int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', decimals, 64), 64)
	return v
}

// medianField is a figure of a result of type T, and the decimals its
// median keeps.
type medianField[T any] struct {
	at       func(*T) *float64
	decimals int
}

// setMedians sets each field of dst to the median of the rounds' values.
func setMedians[T any](dst *T, rounds []*T, fields ...medianField[T]) {
	for _, f := range fields {
		*f.at(dst) = round(medianOf(rounds, func(r *T) float64 { return *f.at(r) }), f.decimals)
	}
}

// medianRound returns the round whose key is the median, the lower of
// the two middle ones when the rounds are even: the round whose figures
// stand for the others where a median of each makes no sense (memory,
// commits, pids).
func medianRound[T any](rounds []*T, key func(*T) float64) *T {
	sorted := slices.Clone(rounds)
	slices.SortStableFunc(sorted, func(a, b *T) int { return cmp.Compare(key(a), key(b)) })
	return sorted[(len(sorted)-1)/2]
}
