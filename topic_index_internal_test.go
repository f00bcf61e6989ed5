package petrel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/address"
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
			for _, e := range x.match(name) {
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
		for _, m := range x.match(name) {
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

func joinWords(ws []string) string {
	s := ws[0]
	for _, w := range ws[1:] {
		s += "." + w
	}
	return s
}
