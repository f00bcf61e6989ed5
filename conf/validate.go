package conf

import (
	"errors"
	"strings"

	petrel "github.com/petrelmq/petrel"
)

// validate runs the node's own checks, petrel.Config.Validate, on the
// converted file. They hold the rules across sections (a route through a
// node that is not in nodes, a send address with no route, a node listed
// twice), so that the file and an embedder's Config obey one set of rules.
// conf's part is the line: the problem's Field is a path of the file
// ("routes[1].via"), which the checker locates, falling back to the
// nearest parent the file wrote (a missing "node" of a send address points
// at the address).
func (f *File) validate(c *checker) error {
	err := f.NodeConfig().Validate()
	if err == nil {
		return nil
	}
	var ce *petrel.ConfigError
	if !errors.As(err, &ce) {
		return &Error{File: c.file, Reason: err.Error(), Err: err}
	}
	reason := ce.Reason
	if ce.Err != nil {
		// A sentinel's words at the end read oddly after a field path;
		// errors.Is still reaches it through ce.
		reason = strings.TrimSuffix(reason, ": "+ce.Err.Error())
	}
	return newError(c.file, c.lookup(ce.Field), ce.Field, reasonf(ce, "%s", reason))
}
