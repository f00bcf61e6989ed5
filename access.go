package petrel

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/petrelmq/petrel/message"
)

// Action is what a peer asks to do with an address; see Node.Authorize.
type Action string

// The actions access rules govern.
const (
	ActionSend    Action = "send"    // put messages on the address
	ActionConsume Action = "consume" // take messages from the address
	ActionRelay   Action = "relay"   // forward messages for the address to another node
)

// actions lists the actions in the order of their counters.
var actions = [...]Action{ActionSend, ActionConsume, ActionRelay}

// AccessRule grants one identity actions on addresses. Rules only ever
// allow: with no rules at all, every peer may do everything (the
// behaviour of a node without an access section); once there is one rule,
// a peer may do an action on an address only if some rule whose Identity
// matches it lists a pattern that matches the address under that action.
// Everything else is denied.
//
// Rules govern what arrives from the network: messages from other nodes
// (send to a local address, relay toward another node) and remote clients.
// The node's own producers and consumers, in its process, are never
// subject to them.
type AccessRule struct {
	// Identity is the authenticated name of a peer, or "*" for any peer.
	// A node's name is the one it proved with the shared secret; when the
	// listener verifies client certificates (tls.client_auth
	// require_and_verify), it is also the certificate's Common Name, which
	// the handshake enforces.
	Identity string
	// Send, Consume and Relay are address patterns for each action: an
	// exact address name ("orders"), a prefix ending in "*" ("orders.*"
	// matches orders.eu and orders.us, not orders), or "*" for every
	// address. They match the name of the address, without "@node": a
	// relay rule for "telemetry" lets the peer relay telemetry to any node
	// this one routes to.
	Send, Consume, Relay []string
}

// patterns returns the patterns r lists for action.
func (r AccessRule) patterns(action Action) []string {
	switch action {
	case ActionSend:
		return r.Send
	case ActionConsume:
		return r.Consume
	case ActionRelay:
		return r.Relay
	}
	return nil
}

// allows reports whether r lets identity do action on the address name.
func (r AccessRule) allows(identity string, action Action, name string) bool {
	if r.Identity != "*" && r.Identity != identity {
		return false
	}
	for _, p := range r.patterns(action) {
		if matchPattern(p, name) {
			return true
		}
	}
	return false
}

// matchPattern matches an address name against an exact name, a prefix
// ending in "*", or "*".
func matchPattern(pattern, name string) bool {
	if prefix, wild := strings.CutSuffix(pattern, "*"); wild {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// validateAccess checks each rule on its own.
func validateAccess(rules []AccessRule) error {
	for i, r := range rules {
		f := fmt.Sprintf("access[%d]", i)
		if r.Identity == "" {
			return cfgErr(f+".identity", `a rule needs an identity: a node or client name, or "*" for any`, nil)
		}
		if r.Identity != "*" {
			if err := message.ValidName(r.Identity); err != nil {
				return cfgErr(f+".identity", err.Error(), err)
			}
		}
		if len(r.Send)+len(r.Consume)+len(r.Relay) == 0 {
			return cfgErr(f, "the rule grants nothing: list address patterns under send, consume or relay", nil)
		}
		for _, a := range actions {
			for j, p := range r.patterns(a) {
				if err := validPattern(p); err != nil {
					return cfgErr(fmt.Sprintf("%s.%s[%d]", f, a, j), err.Error(), err)
				}
			}
		}
	}
	return nil
}

// validPattern checks an address pattern.
func validPattern(p string) error {
	if p == "*" {
		return nil
	}
	prefix, wild := strings.CutSuffix(p, "*")
	if strings.Contains(prefix, "*") {
		return fmt.Errorf(`pattern %q: "*" may only end a pattern ("orders.*"), or be the whole of it`, p)
	}
	if wild && prefix == "" {
		return nil
	}
	if err := message.ValidName(prefix); err != nil {
		return fmt.Errorf("pattern %q is not an address name or a name prefix ending in \"*\": %w", p, err)
	}
	return nil
}

// accessControl holds the rules in force, which a reload swaps, and counts
// denials.
type accessControl struct {
	rules  atomic.Pointer[[]AccessRule] // nil: no rules, everything allowed
	denied [len(actions)]atomic.Int64
}

// set installs rules; none at all allows everything.
func (a *accessControl) set(rules []AccessRule) {
	if len(rules) == 0 {
		a.rules.Store(nil)
		return
	}
	own := make([]AccessRule, len(rules))
	copy(own, rules)
	a.rules.Store(&own)
}

// Authorize decides whether identity (a client's or node's authenticated
// name) may do action on addr, by the node's access rules (see
// AccessRule). addr is an address name; a "@node" suffix is ignored for
// matching. It returns nil when allowed, or an error wrapping ErrDenied
// that says who may not do what, and counts the denial (AccessStats, and
// the metric petrel_access_denied_total).
//
// The node calls it for each message that arrives from another node; a
// remote client's publish and subscribe call it too. The node's own
// Producer and Consumer never do.
func (n *Node) Authorize(identity string, action Action, addr string) error {
	rules := n.access.rules.Load()
	if rules == nil {
		return nil
	}
	name, _, _ := strings.Cut(addr, "@")
	for _, r := range *rules {
		if r.allows(identity, action, name) {
			return nil
		}
	}
	for i, a := range actions {
		if a == action {
			n.access.denied[i].Add(1)
		}
	}
	return fmt.Errorf("node %s: peer %q may not %s (no access rule for %q or \"*\" lists a %s pattern that matches %q): %w",
		n.cfg.Name, identity, doing(action, addr), identity, action, name, ErrDenied)
}

// doing phrases an action on addr for an error.
func doing(action Action, addr string) string {
	switch action {
	case ActionSend:
		return fmt.Sprintf("send to %q", addr)
	case ActionConsume:
		return fmt.Sprintf("consume from %q", addr)
	case ActionRelay:
		return fmt.Sprintf("relay %q", addr)
	}
	return fmt.Sprintf("do %q on %q", string(action), addr)
}

// AccessStats are the access rules in force and the denials they made.
type AccessStats struct {
	// Rules counts the rules in force; 0 means everything is allowed.
	Rules int `json:"rules"`
	// Denied counts the denials since the node started, by action.
	Denied map[Action]int64 `json:"denied"`
}

// AccessStats returns the number of rules in force and the denials so far.
func (n *Node) AccessStats() AccessStats {
	st := AccessStats{Denied: make(map[Action]int64, len(actions))}
	if rules := n.access.rules.Load(); rules != nil {
		st.Rules = len(*rules)
	}
	for i, a := range actions {
		st.Denied[a] = n.access.denied[i].Load()
	}
	return st
}
