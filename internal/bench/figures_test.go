package bench

import (
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	hundred := make(latencies, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // reversed: percentiles sorts
	}
	for _, tc := range []struct {
		name string
		l    latencies
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", latencies{7}, 99, 7},
		{"p50 of 100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"max of 100", hundred, 100, 100 * time.Millisecond},
		{"p50 of 3", latencies{3, 1, 2}, 50, 2},
		{"p1 of 3", latencies{3, 1, 2}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.percentiles(tc.p)[0]; got != tc.want {
				t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}
