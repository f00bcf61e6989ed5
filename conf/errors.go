package conf

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrInvalid is wrapped by every *Error: it is returned when a configuration
// file is not valid YAML, has a key Petrel does not know, a value of the wrong
// type, or a value that breaks a rule. Callers that only need "is the file
// bad?" check errors.Is(err, conf.ErrInvalid).
var ErrInvalid = errors.New("invalid configuration")

// Error is one problem in a configuration file. Parse and Load report the
// first problem in document order, so an operator fixes the file top-down.
//
// errors.Is(err, ErrInvalid) holds for every *Error. Where a package owns the
// rule that was broken, Err wraps its sentinel too, so errors.Is(err,
// address.ErrRole) holds for an unknown role.
type Error struct {
	// File is the file name as given to Load or Parse.
	File string
	// Line and Column locate the problem, both counted from 1. They point at
	// the key of the offending field, or at the list item for a problem of a
	// whole item. Zero means unknown: the YAML parser reports lines but not
	// columns, and a problem of the whole file has neither.
	Line, Column int
	// Field is the path of the offending field, such as "addresses[1].role".
	// Empty for a problem of the whole file, such as a YAML syntax error.
	Field string
	// Reason says what is wrong, in words for the operator.
	Reason string
	// Err is the underlying error, if any. It may wrap a package sentinel.
	Err error
}

// Error returns the problem as "file:line:column: field: reason", leaving out
// the parts that are unknown, the way compilers report errors so that editors
// can jump to the line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the underlying error, so errors.Is reaches the sentinel of
// the package that owns the rule (address.ErrRole, for one).
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid. It lets one *Error match both
// ErrInvalid and the sentinel that Err wraps, with a single Unwrap chain.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// problem is an error whose text is already a Reason for the operator and
// which may wrap a package sentinel. Value parsers and checks return it so
// that the sentence the operator reads and the sentinel a caller matches are
// chosen in one place.
type problem struct {
	reason string
	err    error
}

func (p *problem) Error() string { return p.reason }
func (p *problem) Unwrap() error { return p.err }

// reasonf returns a problem with the formatted reason, wrapping err (which may
// be nil).
func reasonf(err error, format string, args ...any) error {
	return &problem{reason: fmt.Sprintf(format, args...), err: err}
}

// position is where a field was set: the line and column of its key.
type position struct{ line, col int }

func nodePos(n *yaml.Node) position { return position{n.Line, n.Column} }

// before orders positions in document order; unknown positions sort last.
func (p position) before(q position) bool {
	if p.line == 0 || q.line == 0 {
		return q.line == 0 && p.line != 0
	}
	if p.line != q.line {
		return p.line < q.line
	}
	return p.col < q.col
}

// newError builds the *Error for err found at field path and position at.
// A problem gives its reason and its wrapped error; any other error gives its
// text and itself.
func newError(file string, at position, path string, err error) *Error {
	e := &Error{File: file, Line: at.line, Column: at.col, Field: path}
	var p *problem
	if errors.As(err, &p) {
		e.Reason, e.Err = p.reason, p.err
	} else {
		e.Reason, e.Err = err.Error(), err
	}
	return e
}

// yamlLine matches the "yaml: line N: reason" form of the YAML parser's
// syntax errors. The parser exports no position for them, so the line is
// taken from the text; the column stays unknown.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns an error of the YAML parser into an *Error with the line
// the parser named, if it named one.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Reason: strings.TrimPrefix(msg, "yaml: "), Err: err}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			e.Line, e.Reason = line, m[2]
		}
	}
	e.Reason = "YAML syntax: " + e.Reason
	return e
}
