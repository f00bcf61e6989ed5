package conf

import (
	"fmt"
	"time"

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
	// Keep holds the publishes that match no subscription for the durable
	// subscriptions made later; see petrel.TopicKeep.
	Keep *KeepSection `yaml:"keep"`
	// MaxQueuedMessages bounds each subscription of the space; see
	// petrel.TopicConfig.MaxQueuedMessages.
	MaxQueuedMessages int64 `yaml:"max_queued_messages"`
	// Overflow is drop_new or drop_oldest; see petrel.TopicConfig.Overflow.
	Overflow string `yaml:"overflow"`
}

// KeepSection is a topic space's keep policy (petrel.TopicKeep).
type KeepSection struct {
	// Messages is how many publishes are held at most. Required.
	Messages int `yaml:"messages"`
	// Age is how old a held publish may be. Default: no limit.
	Age Duration `yaml:"age"`
}

func (s *TopicSection) check(c *checker, path string) {
	c.required(path, "pattern", "a topic space needs a pattern, such as \"orders.#\"")
	if s.Pattern == "" {
		return
	}
	if _, err := address.ParsePattern(s.Pattern); err != nil {
		c.fail(join(path, "pattern"), reasonf(err, "%v", err))
	}
	c.count(join(path, "max_queued_messages"), s.MaxQueuedMessages)
	checkOverflow(c, join(path, "overflow"), s.Overflow)
	if s.Keep != nil {
		keep := join(path, "keep")
		c.required(keep, "messages", "a keep policy needs a bound on the publishes it holds, such as messages: 10000")
		c.atLeast(join(keep, "messages"), int64(s.Keep.Messages), 1)
		c.positive(join(keep, "age"), s.Keep.Age)
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
		tc := petrel.TopicConfig{Pattern: t.Pattern, MaxQueuedMessages: t.MaxQueuedMessages, Overflow: t.Overflow}
		if t.Keep != nil {
			tc.Keep = petrel.TopicKeep{Messages: t.Keep.Messages, Age: time.Duration(t.Keep.Age)}
		}
		out = append(out, tc)
	}
	return out
}

// topicKeys are the top-level keys of topics outside the list:
// topic_interest_grace, topic_forward_max_queued and
// topic_forward_overflow.
type topicKeys struct{ f *File }

func (k topicKeys) check(c *checker, _ string) {
	c.positive("topic_interest_grace", k.f.TopicInterestGrace)
	c.count("topic_forward_max_queued", k.f.TopicForwardMaxQueued)
	checkOverflow(c, "topic_forward_overflow", k.f.TopicForwardOverflow)
}

// checkOverflow checks an overflow policy: drop_new or drop_oldest.
func checkOverflow(c *checker, path, v string) {
	switch v {
	case "", "drop_new", "drop_oldest":
	default:
		c.fail(path, reasonf(nil, "want drop_new or drop_oldest, got %q", v))
	}
}
