package address

import (
	"errors"
	"fmt"
)

// ErrRole is returned when a role name is not one of receive, send or relay.
var ErrRole = errors.New("unknown address role")

// Role is what a node does with an address.
type Role int

const (
	// RoleReceive: messages are consumed on this node.
	RoleReceive Role = iota + 1
	// RoleSend: messages are forwarded toward the node that hosts the address.
	RoleSend
	// RoleRelay: this node passes messages on toward their destination.
	RoleRelay
)

// String returns the role's configuration name.
func (r Role) String() string {
	switch r {
	case RoleReceive:
		return "receive"
	case RoleSend:
		return "send"
	case RoleRelay:
		return "relay"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole parses "receive", "send" or "relay".
func ParseRole(s string) (Role, error) {
	switch s {
	case "receive":
		return RoleReceive, nil
	case "send":
		return RoleSend, nil
	case "relay":
		return RoleRelay, nil
	}
	return 0, fmt.Errorf("%q: %w (want receive, send or relay)", s, ErrRole)
}
