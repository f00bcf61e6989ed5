package message

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxNameLen is the longest address or node name, in bytes. Names end up in
// file paths, SQLite keys and log lines, so they are kept short and plain.
const maxNameLen = 128

// nameRule tells a user what a name may hold; every name error ends with it.
const nameRule = "use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'"

// ParseDestination splits a destination into its address name and node name.
// "orders" gives ("orders", ""), meaning the local node; "orders@plant-7"
// gives ("orders", "plant-7"). Both names must pass ValidName, so a second
// '@' is an error. Errors wrap ErrDestination.
func ParseDestination(s string) (name, node string, err error) {
	name, node, hasNode := strings.Cut(s, "@")
	if err := validName("address name", name); err != nil {
		return "", "", fmt.Errorf("destination %s: %w", clip(s), err)
	}
	if hasNode {
		if err := validName("node name", node); err != nil {
			return "", "", fmt.Errorf("destination %s: %w", clip(s), err)
		}
	}
	return name, node, nil
}

// JoinDestination is the inverse of ParseDestination: "name@node", or just
// name when node is empty.
func JoinDestination(name, node string) string {
	if node == "" {
		return name
	}
	return name + "@" + node
}

// ValidName checks the syntax shared by address names and node names: 1 to
// 128 bytes of ASCII letters, digits, '.', '_' and '-', not starting with '.'
// (which would make hidden files and "..") or '-' (which would read as a
// command-line flag). Errors wrap ErrDestination.
func ValidName(s string) error {
	return validName("name", s)
}

// validName is ValidName with the kind of name ("node name", ...) to put in
// the error.
func validName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty; %s: %w", what, nameRule, ErrDestination)
	case len(s) > maxNameLen:
		return fmt.Errorf("%s %s is %d bytes long; %s: %w", what, clip(s), len(s), nameRule, ErrDestination)
	case s[0] == '.' || s[0] == '-':
		return fmt.Errorf("%s %s starts with %q; %s: %w", what, clip(s), s[0], nameRule, ErrDestination)
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return fmt.Errorf("%s %s has %q at byte %d; %s: %w", what, clip(s), r, i, nameRule, ErrDestination)
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '-'
}
