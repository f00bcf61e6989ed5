package petrel

import (
	"strings"
	"testing"
)

// An answers cache starts again empty past any of its bounds: keys, the
// weight of the answers, and the bytes of the keys, which a peer chooses
// (long hops in a next-hops question).
func TestAnswersBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   func(i int) string
		w     int
		limit int // puts that fit before it starts again
	}{
		{"keys", func(i int) string { return strings.Repeat("k", 8) + string(rune('a'+i%26)) + strings.Repeat("x", i/26) }, 1, answersMax},
		{"weight", func(i int) string { return "t" + strings.Repeat("x", i) }, 1 << 10, answersWeight / (1 << 10)},
		{"key bytes", func(i int) string { return strings.Repeat("h", 64<<10-1) + string(rune('a'+i)) }, 0, answersKeyBytes / (64 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a answers[int]
			for i := range tc.limit {
				a.put(tc.key(i), i, tc.w)
			}
			if n := a.size(); n != tc.limit {
				t.Fatalf("%d kept after %d puts, want all", n, tc.limit)
			}
			if v, ok := a.get(tc.key(0)); !ok || v != 0 {
				t.Fatalf("the first answer: %v %v", v, ok)
			}
			a.put(tc.key(tc.limit), tc.limit, tc.w)
			if n := a.size(); n != 1 {
				t.Fatalf("%d kept past the bound, want 1: it starts again", n)
			}
			if _, ok := a.get(tc.key(0)); ok {
				t.Fatal("an answer from before the bound is still kept")
			}
		})
	}
}
