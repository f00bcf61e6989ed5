package conf

import (
	"fmt"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
)

// TopicSection declares one topic space: every address name its pattern
// matches is a topic (multicast), published to every subscription whose
// pattern matches it.
type TopicSection struct {
	// Pattern of the space's names: dot-separated words, '*' for exactly
	// one word, '#' for zero or more ("orders.#").
	Pattern string `yaml:"pattern"`
}

func (s *TopicSection) check(c *checker, path string) {
	c.required(path, "pattern", "a topic space needs a pattern, such as \"orders.#\"")
	if s.Pattern == "" {
		return
	}
	if _, err := address.ParsePattern(s.Pattern); err != nil {
		c.fail(join(path, "pattern"), reasonf(err, "%v", err))
	}
}

type topicList []TopicSection

func (l topicList) check(c *checker, path string) {
	first := make(map[string]int, len(l))
	for i := range l {
		item := fmt.Sprintf("%s[%d]", path, i)
		l[i].check(c, item)
		if j, dup := first[l[i].Pattern]; dup && l[i].Pattern != "" {
			c.fail(join(item, "pattern"), reasonf(nil, "topic space %q is declared twice (first as %s[%d])", l[i].Pattern, path, j))
			continue
		}
		first[l[i].Pattern] = i
	}
}

func (f *File) topicConfigs() []petrel.TopicConfig {
	var out []petrel.TopicConfig
	for _, t := range f.Topics {
		out = append(out, petrel.TopicConfig{Pattern: t.Pattern})
	}
	return out
}
