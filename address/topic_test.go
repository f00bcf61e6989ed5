package address

import (
	"errors"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

func TestValidTopic(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"orders.eu.created", true},
		{"a_b.c-d.9", true},
		{"", false},
		{".orders", false},
		{"orders.", false},
		{"orders..eu", false},
		{"orders.-eu", false},
		{"orders.*", false},
		{"orders.#", false},
		{"orders eu", false},
		{"orders@plant", false},
		{strings.Repeat("a.", 64) + "a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidTopic(tc.name)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidTopic(%q) = %v, want ok=%v", tc.name, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrTopicName) {
				t.Fatalf("error %v does not wrap ErrTopicName", err)
			}
		})
	}
}

// An error for a character a word may not hold names that character, not
// the first byte of its UTF-8 encoding ('é' was named 'Ã').
func TestTopicErrorsNameTheCharacter(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"orders.café", `word "café" has 'é'`},
		{"orders.東京", `word "東京" has '東'`},
		{"orders.a b", `word "a b" has ' '`},
	} {
		_, perr := ParsePattern(tc.s)
		terr := ValidTopic(tc.s)
		for _, err := range []error{perr, terr} {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want it to say %s", tc.s, err, tc.want)
			}
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, s := range []string{"", ".", "a..b", "a.", ".a", "a.b*", "#a", "a.**", "a.##", "a b", "a.-b", strings.Repeat("a", 129)} {
		t.Run(s, func(t *testing.T) {
			if _, err := ParsePattern(s); !errors.Is(err, ErrTopicPattern) {
				t.Fatalf("ParsePattern(%q) = %v, want ErrTopicPattern", s, err)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.eu", false},
		{"orders.eu.created", "orders.eu.created", true},
		{"orders.eu.created", "orders.us.created", false},
		// '*' is exactly one word.
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders", false},
		{"orders.*", "orders.eu.created", false},
		{"*.eu.*", "orders.eu.created", true},
		{"*", "orders", true},
		{"*", "orders.eu", false},
		// '#' at the end: zero or more words.
		{"orders.#", "orders", true},
		{"orders.#", "orders.eu", true},
		{"orders.#", "orders.eu.created", true},
		{"orders.#", "order", false},
		{"orders.#", "billing.orders", false},
		// '#' at the start.
		{"#.created", "created", true},
		{"#.created", "orders.eu.created", true},
		{"#.created", "orders.eu.created.late", false},
		// '#' in the middle.
		{"orders.#.created", "orders.created", true},
		{"orders.#.created", "orders.eu.created", true},
		{"orders.#.created", "orders.eu.de.created", true},
		{"orders.#.created", "orders.eu.deleted", false},
		// '#' alone, and runs of '#'.
		{"#", "orders", true},
		{"#", "a.b.c.d", true},
		{"#.#", "orders", true},
		{"#.#", "a.b.c", true},
		{"orders.#.#", "orders", true},
		{"#.*", "orders", true},
		{"#.*.#", "a.b", true},
		{"*.#.*", "a", false},
		{"*.#.*", "a.b", true},
		{"*.#.*", "a.b.c.d", true},
		{"#.a.#.a", "a.x.a", true},
		{"#.a.#.a", "a", false},
	} {
		t.Run(tc.pattern+"/"+tc.name, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match(tc.name); got != tc.want {
				t.Fatalf("%q.Match(%q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
			}
		})
	}
}

func TestPatternCovers(t *testing.T) {
	for _, tc := range []struct {
		space, pattern string
		want           bool
	}{
		{"orders.#", "orders.#", true},
		{"orders.#", "orders", true},
		{"orders.#", "orders.*", true},
		{"orders.#", "orders.*.created", true},
		{"orders.#", "orders.#.created", true},
		{"orders.#", "#", false},
		{"orders.#", "*", false},
		{"orders.#", "billing.#", false},
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders.#", false},
		{"orders.*", "orders.*.*", false},
		{"#", "#", true},
		{"#", "a.*.#", true},
		{"*.#", "#.x", true},
		{"*.#", "#", false},
		{"#.*", "#.x", true},
		{"#.#", "orders.#", true},
		{"a.b", "a.*", false},
		{"a.*", "a.b", true},
	} {
		t.Run(tc.space+"/"+tc.pattern, func(t *testing.T) {
			s, err := ParsePattern(tc.space)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Covers(p); got != tc.want {
				t.Fatalf("%q.Covers(%q) = %v, want %v", tc.space, tc.pattern, got, tc.want)
			}
		})
	}
}

// FuzzParsePattern checks that no input makes ParsePattern panic, that
// every error wraps ErrTopicPattern, that an accepted pattern prints as it
// was given and covers itself, that a topic name is an address name, and
// that Match and Covers agree: a pattern that covers another matches
// every name that one matches, tried on a name made from the input. Seeds in testdata/fuzz/FuzzParsePattern.
func FuzzParsePattern(f *testing.F) {
	f.Add("orders.#", "orders.eu.created")
	f.Add("*.#.*", "a.b")
	f.Fuzz(func(t *testing.T, s, name string) {
		p, err := ParsePattern(s)
		if err != nil {
			if !errors.Is(err, ErrTopicPattern) {
				t.Fatalf("error %v does not wrap ErrTopicPattern", err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("String() = %q, want %q", p.String(), s)
		}
		if !p.Covers(p) {
			t.Fatalf("%q does not cover itself", s)
		}
		if ValidTopic(name) == nil && message.ValidName(name) != nil {
			t.Fatalf("topic name %q is no address name: %v", name, message.ValidName(name))
		}
		q, err := ParsePattern(name)
		if err != nil || ValidTopic(name) != nil {
			return
		}
		// name is a plain topic: as a pattern it matches itself only.
		if p.Covers(q) != p.Match(name) {
			t.Fatalf("%q.Covers(%q) = %v but Match = %v", s, name, p.Covers(q), p.Match(name))
		}
	})
}

// Match splits a name of up to smallName words without allocating: a
// node matches every publish against every subscription. Longer names
// still match.
func TestPatternMatchAllocs(t *testing.T) {
	p, err := ParsePattern("metrics.*.#.cpu")
	if err != nil {
		t.Fatal(err)
	}
	short := "metrics.eu.host.cpu"
	if n := testing.AllocsPerRun(100, func() {
		if !p.Match(short) {
			t.Fatal("no match")
		}
	}); n != 0 {
		t.Fatalf("Match of %q allocates %v times, want 0", short, n)
	}
	for _, words := range []int{smallName - 2, smallName - 1, smallName, smallName + 5} {
		name := "metrics.eu." + strings.Repeat("x.", words-3) + "cpu"
		if got := len(strings.Split(name, ".")); got != words {
			t.Fatalf("%d words, want %d", got, words)
		}
		if !p.Match(name) || p.Match(name+".mem") {
			t.Fatalf("%d words: Match %q wrong", words, name)
		}
	}
}
