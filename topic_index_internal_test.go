package petrel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// The index finds, for every name, exactly the subscriptions whose
// pattern address.Pattern.Match says match it, each once: random
// patterns of literal words, '*' and '#' (several '#' too), against
// random names, empty words included, as subscriptions come and go.
func TestSubIndexAgreesWithMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "*", "#"}
	nameWords := []string{"a", "b", "c", ""}
	var x subIndex
	var subs []*subEntry
	randomPattern := func() address.Pattern {
		for {
			n := 1 + rng.IntN(4)
			ws := make([]string, n)
			for i := range ws {
				ws[i] = words[rng.IntN(len(words))]
			}
			p, err := address.ParsePattern(joinWords(ws))
			if err == nil {
				return p
			}
		}
	}
	for round := range 400 {
		if len(subs) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(subs))
			x.remove(subs[i].pattern.String(), subs[i])
			subs = slices.Delete(subs, i, i+1)
		} else {
			e := &subEntry{name: fmt.Sprint("s", round), pattern: randomPattern()}
			x.add(e.pattern.String(), e)
			subs = append(subs, e)
		}
		for range 20 {
			ws := make([]string, 1+rng.IntN(5))
			for i := range ws {
				ws[i] = nameWords[rng.IntN(len(nameWords))]
			}
			name := joinWords(ws)
			var want []string
			for _, e := range subs {
				if e.pattern.Match(name) {
					want = append(want, e.name)
				}
			}
			var got []string
			for _, e := range mustMatch(t, &x, name) {
				got = append(got, e.name)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, name %q: index gives %v, Match %v", round, name, got, want)
			}
		}
	}
	// Patterns of many '#', which would take paths without end if each
	// were followed: every node is visited once per count of words left.
	name := strings.Repeat("a.", 63) + "a"
	for _, text := range []string{strings.Repeat("#.", 63) + "#", strings.Repeat("#.a.", 31) + "#", strings.Repeat("a.#.", 31) + "b"} {
		p, err := address.ParsePattern(text)
		if err != nil {
			t.Fatal(err)
		}
		e := &subEntry{name: text, pattern: p}
		x.add(text, e)
		subs = append(subs, e)
		got := 0
		for _, m := range mustMatch(t, &x, name) {
			if m == e {
				got++
			}
		}
		if want := map[bool]int{true: 1}[p.Match(name)]; got != want {
			t.Fatalf("pattern %s, name of 64 words: matched %d times, want %d", text, got, want)
		}
	}
	for _, e := range subs {
		x.remove(e.pattern.String(), e)
	}
	if !x.root.empty() || x.multiHash != 0 {
		t.Fatalf("the index holds nodes (%+v) or counts patterns (%d) after every subscription went", x.root, x.multiHash)
	}
}

// mustMatch is x.match, which must not give up.
func mustMatch(t *testing.T, x *subIndex, name string) []*subEntry {
	t.Helper()
	out, ok := x.match(name)
	if !ok {
		t.Fatalf("the index gave up on %q", name)
	}
	return out
}

// Past its bound of visits the index gives up, and the node matches each
// subscription's pattern instead: the publish gets the same
// subscriptions, whatever patterns a client holds.
func TestSubIndexGivesUpPastItsBound(t *testing.T) {
	tp := &topics{subs: map[string]*subEntry{}}
	want := map[*queue.Queue]bool{}
	for i, text := range []string{"*.*.*", "#", "*.#", "#.b", "a.*.c", "a.b.c", "x.#"} {
		p, err := address.ParsePattern(text)
		if err != nil {
			t.Fatal(err)
		}
		e := &subEntry{name: fmt.Sprint("s", i), pattern: p, q: &queue.Queue{}}
		tp.addSub(e)
		if p.Match("a.b.c") {
			want[e.q] = true
		}
	}
	if _, ok := tp.index.match("a.b.c"); !ok {
		t.Fatal("the index gave up under its default bound")
	}
	tp.index.budget = 3
	if _, ok := tp.index.match("a.b.c"); ok {
		t.Fatal("the index did not give up past a bound of 3 visits")
	}
	got := map[*queue.Queue]bool{}
	for _, q := range tp.match("a.b.c") {
		got[q] = true
	}
	if n := tp.fallbacks.Load(); n != 1 {
		t.Fatalf("%d fallbacks counted, want 1", n)
	}
	if len(got) != len(want) || len(want) != 5 {
		t.Fatalf("the publish got %d subscriptions, want the %d (of 5) whose pattern matches", len(got), len(want))
	}
	for q := range want {
		if !got[q] {
			t.Fatal("a matching subscription is missing from the fallback's answer")
		}
	}
}

func joinWords(ws []string) string {
	s := ws[0]
	for _, w := range ws[1:] {
		s += "." + w
	}
	return s
}
