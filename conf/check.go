package conf

import (
	"math"
	"sort"
	"strings"

	"github.com/petrelmq/petrel/message"
)

// checker collects the problems that checks find after decoding. It knows
// where the decoder saw each field, so a check names a field path and the
// checker finds its line; and it knows which fields the file set at all, so
// a check can tell "written as 0" (often a mistake) from "absent" (the
// default).
type checker struct {
	file string
	set  map[string]position
	errs []*Error
}

// has reports whether the file set the field at path to a non-null value.
func (c *checker) has(path string) bool {
	_, ok := c.set[path]
	return ok
}

// fail records err against the field at path. A field with no recorded
// position (one filled in from a merge, or a whole list item) takes the
// position of its nearest recorded parent.
func (c *checker) fail(path string, err error) {
	c.errs = append(c.errs, newError(c.file, c.lookup(path), path, err))
}

func (c *checker) lookup(path string) position {
	for p := path; p != ""; p = parent(p) {
		if at, ok := c.set[p]; ok {
			return at
		}
	}
	return position{}
}

// parent drops the last element of a field path: "a[1].b" → "a[1]" → "a".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// first returns the earliest problem in document order, or nil. Checks run
// section by section, not line by line, so the order is restored here: the
// operator fixes the file from the top.
func (c *checker) first() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool {
		return position{c.errs[i].Line, c.errs[i].Column}.before(position{c.errs[j].Line, c.errs[j].Column})
	})
	return c.errs[0]
}

// name checks a node or address name that the file set.
func (c *checker) name(path, s string) {
	if !c.has(path) {
		return
	}
	if err := message.ValidName(s); err != nil {
		// The message package's text ends with its sentinel's words,
		// which read oddly after a field path; the sentinel stays in Err.
		reason := strings.TrimSuffix(err.Error(), ": "+message.ErrDestination.Error())
		c.fail(path, reasonf(err, "%s", reason))
	}
}

// nonEmpty checks a string that, when the file sets it, must not be empty.
func (c *checker) nonEmpty(path, s, why string) {
	if c.has(path) && s == "" {
		c.fail(path, reasonf(nil, "must not be empty (%s)", why))
	}
}

// count checks a count, where 0 means the package default.
func (c *checker) count(path string, n int64) {
	if n < 0 {
		c.fail(path, reasonf(nil, "must not be negative, got %d (0 or leaving it out means the default)", n))
	}
}

// atLeast checks a number that, when the file sets it, must be at least min.
func (c *checker) atLeast(path string, n, min int64) {
	if c.has(path) && n < min {
		c.fail(path, reasonf(nil, "must be at least %d, got %d (leave it out for the default)", min, n))
	}
}

// positive checks a duration that, when the file sets it, must be above
// zero: zero would otherwise mean "default" and surprise whoever wrote it.
func (c *checker) positive(path string, d Duration) {
	if c.has(path) && d <= 0 {
		c.fail(path, reasonf(nil, "must be more than 0, got %s (leave it out for the default)", d))
	}
}

// fitsInt checks a size that feeds an int field, which is 32 bits on some
// platforms.
func (c *checker) fitsInt(path string, s Size) {
	if int64(s) > math.MaxInt {
		c.fail(path, reasonf(nil, "%s is too large for this platform (the most is %d bytes)", s, math.MaxInt))
	}
}

// required checks that the item at path sets key. The problem points at the
// item, since the key has no line.
func (c *checker) required(path, key, reason string) {
	if !c.has(join(path, key)) {
		c.fail(path, reasonf(nil, "%s", reason))
	}
}
