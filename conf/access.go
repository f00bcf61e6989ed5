package conf

import (
	"fmt"

	petrel "github.com/petrelmq/petrel"
)

// AccessSection is one access rule (petrel.AccessRule): what one identity
// may do with which addresses. With no rules, everything is allowed; with
// rules, what no rule allows is denied. The patterns' syntax, and the rule
// that an identity is a name or "*", are petrel.Config.Validate's.
type AccessSection struct {
	// Identity is a peer's authenticated name, or "*" for any.
	Identity string `yaml:"identity"`
	// Send, Consume and Relay are address patterns: a name, a prefix
	// ending in "*", or "*".
	Send    []string `yaml:"send"`
	Consume []string `yaml:"consume"`
	Relay   []string `yaml:"relay"`
	// Publish and Subscribe are topic patterns: dot-separated words, "*"
	// for one word, "#" for zero or more. Publishing to a topic needs a
	// publish pattern that matches it; subscribing, a subscribe pattern
	// that covers the pattern asked for.
	Publish   []string `yaml:"publish"`
	Subscribe []string `yaml:"subscribe"`
}

func (a *AccessSection) check(c *checker, path string) {
	c.required(path, "identity", `an access rule needs an identity: a node or client name, or "*" for any`)
}

func (a *AccessSection) accessRule() petrel.AccessRule {
	return petrel.AccessRule{Identity: a.Identity, Send: a.Send, Consume: a.Consume, Relay: a.Relay,
		Publish: a.Publish, Subscribe: a.Subscribe}
}

// accessList is the access section.
type accessList []AccessSection

func (l accessList) check(c *checker, path string) {
	for i := range l {
		l[i].check(c, fmt.Sprintf("%s[%d]", path, i))
	}
}

func (f *File) accessRules() []petrel.AccessRule {
	var rules []petrel.AccessRule
	for _, a := range f.Access {
		rules = append(rules, a.accessRule())
	}
	return rules
}
