package address

import (
	"errors"
	"fmt"
	"strings"
)

// Topic names and patterns, with AMQP topic semantics:
//
//	name     orders.eu.created        dot-separated words, each non-empty
//	pattern  orders.*.created         '*' is exactly one word
//	         orders.#                 '#' is zero or more words
//
// so "orders.#" matches "orders", "orders.eu" and "orders.eu.created", and
// "orders.*" matches "orders.eu" but not "orders". A word holds letters,
// digits, '_' and '-'; a name is also a valid address name, since it is
// what a producer sends to.

var (
	// ErrTopicName is returned when a topic name is empty, too long, or has
	// an empty word or a character that a word may not hold.
	ErrTopicName = errors.New("invalid topic name")
	// ErrTopicPattern is returned when a topic pattern is empty, too long,
	// or has an empty word, or a word that mixes '*' or '#' with letters.
	ErrTopicPattern = errors.New("invalid topic pattern")
)

// maxTopicLen bounds names and patterns, as message.ValidName bounds
// address names.
const maxTopicLen = 128

const topicRule = "use dot-separated words of letters, digits, '_' or '-', at most 128 bytes"

const patternRule = "use dot-separated words of letters, digits, '_' or '-', or '*' (one word) or '#' (zero or more words), at most 128 bytes"

// ValidTopic checks that s is a topic name. Errors wrap ErrTopicName.
func ValidTopic(s string) error {
	if s == "" || len(s) > maxTopicLen {
		return fmt.Errorf("topic %q: %s: %w", clipTopic(s), topicRule, ErrTopicName)
	}
	for _, w := range strings.Split(s, ".") {
		if err := validWord(w); err != nil {
			return fmt.Errorf("topic %q: %s; %s: %w", s, err, topicRule, ErrTopicName)
		}
	}
	return nil
}

// Pattern is a parsed topic pattern. The zero value matches nothing; make
// one with ParsePattern.
type Pattern struct {
	text  string
	words []string
}

// ParsePattern parses a topic pattern. Errors wrap ErrTopicPattern.
func ParsePattern(s string) (Pattern, error) {
	if s == "" || len(s) > maxTopicLen {
		return Pattern{}, fmt.Errorf("topic pattern %q: %s: %w", clipTopic(s), patternRule, ErrTopicPattern)
	}
	words := strings.Split(s, ".")
	for _, w := range words {
		if err := validPatternWord(w); err != nil {
			return Pattern{}, fmt.Errorf("topic pattern %q: %s; %s: %w", s, err, patternRule, ErrTopicPattern)
		}
	}
	return Pattern{text: s, words: words}, nil
}

func validPatternWord(w string) error {
	if w == "*" || w == "#" {
		return nil
	}
	return validWord(w)
}

// validWord checks a word of a topic name. A word of those bytes is also
// an address name's, so a valid topic name is a valid address name.
func validWord(w string) error {
	switch {
	case w == "":
		return errors.New("empty word")
	case w[0] == '-':
		return fmt.Errorf("word %q starts with '-'", w)
	}
	// By rune, not by byte, so that the error names the character given:
	// the first byte of 'é' printed with %q is 'Ã'.
	for _, r := range w {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("word %q has %q", w, r)
		}
	}
	return nil
}

func clipTopic(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String returns the pattern as it was parsed.
func (p Pattern) String() string { return p.text }

// IsZero reports whether p is the zero Pattern.
func (p Pattern) IsZero() bool { return p.words == nil }

// Match reports whether the topic name matches p. The name is not
// validated: an invalid name simply matches what its words match.
func (p Pattern) Match(name string) bool {
	if p.words == nil {
		return false
	}
	// A node matches each publish against every subscription: names of
	// up to smallName words are split and matched without allocating.
	var buf [smallName]string
	words := buf[:0]
	for {
		i := strings.IndexByte(name, '.')
		if i < 0 {
			break
		}
		words = append(words, name[:i])
		name = name[i+1:]
	}
	return matchWords(p.words, append(words, name))
}

// smallName is how many words a topic name has at most for Match not to
// allocate.
const smallName = 16

// matchWords matches pattern words against name words by dynamic
// programming over name prefixes, so that no pattern, however many '#' it
// holds, costs more than len(pat)*len(name) steps.
func matchWords(pat, name []string) bool {
	var a, b [smallName + 1]bool
	cur, next := a[:], b[:]
	if len(name) > smallName {
		cur, next = make([]bool, len(name)+1), make([]bool, len(name)+1)
	}
	cur, next = cur[:len(name)+1], next[:len(name)+1]
	cur[0] = true
	for _, w := range pat {
		seen := false
		for j := range next {
			switch w {
			case "#":
				seen = seen || cur[j]
				next[j] = seen
			case "*":
				next[j] = j > 0 && cur[j-1]
			default:
				next[j] = j > 0 && cur[j-1] && name[j-1] == w
			}
		}
		cur, next = next, cur
	}
	return cur[len(name)]
}

// Covers reports whether every name q matches, p matches too: whether q
// lies within the topic space p. The check is sound (it never says yes
// when some name matches q and not p) and exact for the patterns people
// write; for contrived mixes of '*' and '#' it may say no.
func (p Pattern) Covers(q Pattern) bool {
	if p.words == nil || q.words == nil {
		return false
	}
	return covers(p.words, q.words)
}

// covers reports whether s covers p, memoising on the suffixes compared:
// at most (len(s)+1)*(len(p)+1) of them.
func covers(s, p []string) bool {
	memo := make([]int8, (len(s)+1)*(len(p)+1)) // 0 unknown, 1 yes, 2 no
	var rec func(i, j int) bool
	rec = func(i, j int) bool {
		k := i*(len(p)+1) + j
		if memo[k] != 0 {
			return memo[k] == 1
		}
		ok := coversStep(s[i:], p[j:], func(di, dj int) bool { return rec(i+di, j+dj) })
		memo[k] = 2
		if ok {
			memo[k] = 1
		}
		return ok
	}
	return rec(0, 0)
}

// coversStep decides whether s covers p from their first words, asking
// rec(di, dj) whether s[di:] covers p[dj:].
func coversStep(s, p []string, rec func(di, dj int) bool) bool {
	if len(s) == 0 {
		return len(p) == 0
	}
	switch s[0] {
	case "#":
		// s's '#' takes no word, or absorbs p's first word (whatever p's
		// word expands to, '#' included).
		return rec(1, 0) || len(p) > 0 && rec(0, 1)
	case "*":
		if len(p) == 0 {
			return false
		}
		if p[0] == "#" {
			// p's '#' may be no word, or at least one, the first of which
			// s's '*' takes.
			return rec(0, 1) && rec(1, 0)
		}
		return rec(1, 1)
	default:
		return len(p) > 0 && p[0] == s[0] && rec(1, 1)
	}
}
