package petrel

import (
	"strings"
	"sync/atomic"

	"github.com/petrelmq/petrel/address"
)

// patternIndex finds the items (subscriptions, pieces of learned
// interest) whose pattern matches a topic name by
// walking the name's words down a tree of the patterns' words, as
// Mosquitto's topic tree does, rather than matching every pattern: a
// node serving thousands of devices, each subscribed to its own topics,
// published to them at 1,200-1,400 msgs/s, about 1 ms of CPU per publish
// at 5,000 subscriptions once their topics outnumbered the answers kept
// (BenchmarkPublishToDevices). It holds the same semantics as
// address.Pattern.Match: a word matches itself, '*' any one word, '#'
// zero or more words. Its owner's lock guards it: topics.mu for the
// subscriptions, interestTable.mu for the interest.
type patternIndex[T comparable] struct {
	root trieNode[T]
	// multiHash counts the patterns with two '#' or more. Only they put a
	// '#' below a '#', which may reach a node by several paths: a match
	// then visits each node once per count of words left (see collect),
	// which drops the duplicates and keeps the cost of any pattern,
	// however many '#' it holds, to nodes times words, as
	// address.Pattern.Match's dynamic programming does.
	multiHash int
	// budget replaces maxVisits when above 0: for a test.
	budget int
}

// subIndex is the index of a node's subscriptions.
type subIndex = patternIndex[*subEntry]

type trieNode[T comparable] struct {
	words      map[string]*trieNode[T]
	star, hash *trieNode[T]
	// items are those whose pattern ends here.
	items []T
}

// add adds item, whose pattern is pattern.
func (x *patternIndex[T]) add(pattern string, item T) {
	n := &x.root
	for _, w := range strings.Split(pattern, ".") {
		n = n.child(w)
	}
	n.items = append(n.items, item)
	if strings.Count(pattern, "#") > 1 {
		x.multiHash++
	}
}

func (n *trieNode[T]) child(w string) *trieNode[T] {
	switch w {
	case "*":
		if n.star == nil {
			n.star = &trieNode[T]{}
		}
		return n.star
	case "#":
		if n.hash == nil {
			n.hash = &trieNode[T]{}
		}
		return n.hash
	}
	if n.words == nil {
		n.words = map[string]*trieNode[T]{}
	}
	c := n.words[w]
	if c == nil {
		c = &trieNode[T]{}
		n.words[w] = c
	}
	return c
}

// remove takes item, whose pattern is pattern, out, and the nodes it
// leaves empty.
func (x *patternIndex[T]) remove(pattern string, item T) {
	if x.root.remove(strings.Split(pattern, "."), item) && strings.Count(pattern, "#") > 1 {
		x.multiHash--
	}
}

// remove takes item, whose pattern's words below n are words, out of the
// tree below n, and reports whether it was there.
func (n *trieNode[T]) remove(words []string, item T) bool {
	if len(words) == 0 {
		for i, s := range n.items {
			if s == item {
				n.items = append(n.items[:i], n.items[i+1:]...)
				return true
			}
		}
		return false
	}
	var c *trieNode[T]
	switch w := words[0]; w {
	case "*":
		c = n.star
	case "#":
		c = n.hash
	default:
		c = n.words[w]
	}
	if c == nil || !c.remove(words[1:], item) {
		return false
	}
	if c.empty() {
		switch w := words[0]; w {
		case "*":
			n.star = nil
		case "#":
			n.hash = nil
		default:
			delete(n.words, w)
		}
	}
	return true
}

func (n *trieNode[T]) empty() bool {
	return len(n.items) == 0 && len(n.words) == 0 && n.star == nil && n.hash == nil
}

// maxVisits bounds the (node, words left) one match visits. Patterns of '*' and '#'
// are reached whatever the name, and a client may hold thousands of
// them, all different: past the bound, match gives up, and its caller
// matches each pattern on its own (address.Pattern.Match), which costs
// what the index saves but no memory.
const maxVisits = 1 << 16

// matchAll is x.match, which past its bound matches each of all by its
// pattern instead (Pattern.Match), counting that in fallbacks.
func matchAll[K, T comparable](x *patternIndex[T], name string, all map[K]T, pattern func(T) address.Pattern, fallbacks *atomic.Int64) []T {
	out, ok := x.match(name)
	if ok {
		return out
	}
	fallbacks.Add(1)
	out = out[:0]
	for _, item := range all {
		if pattern(item).Match(name) {
			out = append(out, item)
		}
	}
	return out
}

// match returns the items whose pattern matches name, each once, and
// false when it gave up past maxVisits (or x.budget, for a test).
func (x *patternIndex[T]) match(name string) ([]T, bool) {
	c := matcher[T]{left: maxVisits}
	if x.budget > 0 {
		c.left = x.budget
	}
	if x.multiHash > 0 {
		c.seen = map[visit[T]]bool{}
	}
	c.collect(&x.root, strings.Split(name, "."))
	return c.out, c.left >= 0
}

// visit is a node reached with rest words of the name left.
type visit[T comparable] struct {
	n    *trieNode[T]
	rest int
}

// matcher is one match under way: what it found, the visits it has
// left, and, when some pattern holds two '#', the visits it made.
type matcher[T comparable] struct {
	out  []T
	left int
	seen map[visit[T]]bool
}

// collect appends the items below n that match words. With seen, it
// visits each node once per count of words left.
func (c *matcher[T]) collect(n *trieNode[T], words []string) {
	if c.left < 0 {
		return // given up
	}
	if c.seen != nil {
		v := visit[T]{n, len(words)}
		if c.seen[v] {
			return
		}
		c.seen[v] = true
	}
	// A visit counts once it is new: with seen, a node is looked up at
	// most once per word left (the loop of '#' below), so a match costs
	// at most maxVisits times the words of a name.
	if c.left--; c.left < 0 {
		return
	}
	if n.hash != nil {
		// '#' takes zero words, or one, or all that are left.
		for i := 0; i <= len(words); i++ {
			c.collect(n.hash, words[i:])
		}
	}
	if len(words) == 0 {
		c.out = append(c.out, n.items...)
		return
	}
	if w := n.words[words[0]]; w != nil {
		c.collect(w, words[1:])
	}
	if n.star != nil {
		c.collect(n.star, words[1:])
	}
}
