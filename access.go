package petrel

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Action is what a peer asks to do with an address; see Node.Authorize.
type Action string

// The actions access rules govern.
const (
	ActionSend    Action = "send"    // put messages on the address
	ActionConsume Action = "consume" // take messages from the address
	ActionRelay   Action = "relay"   // forward messages for the address to another node
	// ActionPublish puts messages on a topic of this node; a topic's
	// publishes need it instead of send.
	ActionPublish Action = "publish"
	// ActionSubscribe subscribes to a topic pattern.
	ActionSubscribe Action = "subscribe"
)

// actions lists the actions in the order of their counters.
var actions = [...]Action{ActionSend, ActionConsume, ActionRelay, ActionPublish, ActionSubscribe}

// AccessRule grants one identity actions on addresses. Rules only ever
// allow: with no rules at all, every peer may do everything (the
// behaviour of a node without an access section); once there is one rule,
// a peer may do an action on an address only if some rule whose Identity
// matches it lists a pattern that matches the address under that action.
// Everything else is denied.
//
// Rules govern what arrives from the network: messages from other nodes
// (send to a local address, relay toward another node) and remote clients
// (send to an address of this node; relay to an address on another node,
// which a client needs instead of send). What the node sends on a peer's
// behalf, the notice of a file that peer handed over, is judged as that
// peer. The node's own producers and consumers, in its process, are never
// subject to them.
//
// A dead-letter address (a name ending in ".dlq", or one an address names
// as its dead_letter) and an expiry address (one an address names as its
// expiry_address) are matched only by a pattern that names them exactly:
// "orders.*" and "*" do not reach "orders.dlq" or "orders.expired". They
// hold what failed or expired, often with the reason; reading or filling
// them is granted on purpose, never by a wildcard written for the live
// addresses.
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
	// address but the dead-letter and expiry ones, which only their exact
	// name matches ("orders.dlq"). They match the name of the address, without "@node": a
	// relay rule for "telemetry" lets the peer relay telemetry to any node
	// this one routes to.
	Send, Consume, Relay []string
	// Publish and Subscribe are topic patterns (address.ParsePattern:
	// dot-separated words, '*' one word, '#' zero or more). Publishing to
	// a topic of this node needs a Publish pattern that matches the topic
	// name ("orders.#" matches orders.eu.created); a Send pattern does not
	// reach a topic. Subscribing needs a Subscribe pattern that covers the
	// whole pattern asked for ("orders.#" covers orders.eu.*, but
	// "orders.*" does not cover orders.#).
	Publish, Subscribe []string
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
	case ActionPublish:
		return r.Publish
	case ActionSubscribe:
		return r.Subscribe
	}
	return nil
}

// How a rule matches an address.
const (
	matchNone  = iota
	matchWild  // by a pattern with "*": not enough for a dead-letter or expiry address
	matchExact // by a pattern that is the name itself
)

// match says how r lets identity do action on the address name: not at
// all, by a wildcard, or by the name itself.
func (r AccessRule) match(identity string, action Action, name string) int {
	if r.Identity != "*" && r.Identity != identity {
		return matchNone
	}

	how := matchNone
	for _, p := range r.patterns(action) {
		if p == name {
			return matchExact
		}
		if matchPattern(p, name) {
			how = matchWild
		}
	}
	return how
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
		if len(r.Send)+len(r.Consume)+len(r.Relay)+len(r.Publish)+len(r.Subscribe) == 0 {
			return cfgErr(f, "the rule grants nothing: list address patterns under send, consume or relay, or topic patterns under publish or subscribe", nil)
		}
		for _, a := range actions {
			for j, p := range r.patterns(a) {
				if err := validRulePattern(a, p); err != nil {
					return cfgErr(fmt.Sprintf("%s.%s[%d]", f, a, j), err.Error(), err)
				}
			}
		}
	}
	return nil
}

// validRulePattern checks a pattern of a rule: a topic pattern for
// publish and subscribe, an address pattern for the others.
func validRulePattern(action Action, p string) error {
	if isTopicAction(action) {
		_, err := address.ParsePattern(p)
		return err
	}
	return validPattern(p)
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
	// noticesDenied counts the file notices not sent because the peer
	// that handed the file over may not send where they were going;
	// noticeLog lets one warning per peer a minute through.
	noticesDenied atomic.Int64
	noticeLog     ratelog.Limiter
	// pathsRefused counts file messages refused, and cleanups not done,
	// because a path was not one the node derives from its own records.
	pathsRefused atomic.Int64
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
// matching. For ActionPublish addr is a topic name, for ActionSubscribe
// a topic pattern. It returns nil when allowed, or an error wrapping ErrDenied
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
	if isTopicAction(action) {
		return n.authorizeTopic(*rules, identity, action, addr)
	}
	name, _, _ := strings.Cut(addr, "@")
	wild := false
	for _, r := range *rules {
		switch r.match(identity, action, name) {
		case matchExact:
			return nil
		case matchWild:
			wild = true
		}
	}
	// Only a pattern naming a dead-letter or expiry address reaches it.
	held := n.heldAddress(name)
	if wild && held == "" {
		return nil
	}
	n.access.deny(action)
	if wild {
		return fmt.Errorf("node %s: peer %q may not %s (%q is %s address, which only a %s pattern naming it exactly reaches): %w",
			n.cfg.Name, identity, doing(action, addr), name, held, action, ErrDenied)
	}
	return fmt.Errorf("node %s: peer %q may not %s (no access rule for %q or \"*\" lists a %s pattern that matches %q): %w",
		n.cfg.Name, identity, doing(action, addr), identity, action, name, ErrDenied)
}

// heldAddress says what the address name holds, if wildcards may not
// reach it: "a dead-letter" (its name ends in ".dlq", or an address names
// it as its dead_letter), "an expiry" (an address names it as its
// expiry_address), or "" for a live address.
func (n *Node) heldAddress(name string) string {
	if queue.IsDeadLetter(name) {
		return "a dead-letter"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	expiry := false
	for _, a := range n.addresses {
		if a.Queue.DeadLetter == name {
			return "a dead-letter"
		}
		expiry = expiry || a.Queue.ExpiryAddress == name
	}
	if expiry {
		return "an expiry"
	}
	return ""
}

// actionFor is the action that sending to dest takes: ActionSend for an
// address of this node, ActionRelay for one on another node. A bare name
// declared as a send address names its node, as for Send.
func (n *Node) actionFor(dest string) (Action, error) {
	_, node, err := n.resolve(dest)
	if err != nil {
		return "", err
	}
	if node == "" || node == n.cfg.Name {
		return ActionSend, nil
	}
	return ActionRelay, nil
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
	case ActionPublish:
		return fmt.Sprintf("publish to topic %q", addr)
	case ActionSubscribe:
		return fmt.Sprintf("subscribe to %q", addr)
	}
	return fmt.Sprintf("do %q on %q", string(action), addr)
}

// AccessStats are the access rules in force and the denials they made.
type AccessStats struct {
	// Rules counts the rules in force; 0 means everything is allowed.
	Rules int `json:"rules"`
	// Denied counts the denials since the node started, by action.
	Denied map[Action]int64 `json:"denied"`
	// NoticesDenied counts the file notices not sent because the peer
	// that handed the file over may not send to their address.
	NoticesDenied int64 `json:"notices_denied"`
	// PathsRefused counts the file messages failed, and cleanups skipped,
	// because a path was not one this node derives from its own records.
	PathsRefused int64 `json:"paths_refused"`
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
	st.NoticesDenied = n.access.noticesDenied.Load()
	st.PathsRefused = n.access.pathsRefused.Load()
	return st
}

// deny counts a denial of action.
func (a *accessControl) deny(action Action) {
	for i, x := range actions {
		if x == action {
			a.denied[i].Add(1)
		}
	}
}

// isTopicAction reports whether action takes topic patterns.
func isTopicAction(action Action) bool {
	return action == ActionPublish || action == ActionSubscribe
}

// authorizeTopic is Authorize for publish, whose addr is a topic name
// that some publish pattern must match, and subscribe, whose addr is a
// topic pattern that some subscribe pattern must cover.
func (n *Node) authorizeTopic(rules []AccessRule, identity string, action Action, addr string) error {
	name, _, _ := strings.Cut(addr, "@")
	var asked address.Pattern
	if action == ActionSubscribe {
		p, err := address.ParsePattern(name)
		if err != nil {
			n.access.deny(action)
			return fmt.Errorf("node %s: peer %q may not %s: %w: %w", n.cfg.Name, identity, doing(action, addr), err, ErrDenied)
		}
		asked = p
	}
	for _, r := range rules {
		if r.Identity != "*" && r.Identity != identity {
			continue
		}
		for _, text := range r.patterns(action) {
			p, err := address.ParsePattern(text)
			if err != nil {
				continue // Validate refuses it; a rule set in by hand grants nothing
			}
			if action == ActionPublish && p.Match(name) || action == ActionSubscribe && p.Covers(asked) {
				return nil
			}
		}
	}
	n.access.deny(action)
	verb := "matches"
	if action == ActionSubscribe {
		verb = "covers"
	}
	return fmt.Errorf("node %s: peer %q may not %s (no access rule for %q or \"*\" lists a %s pattern that %s %q): %w",
		n.cfg.Name, identity, doing(action, addr), identity, action, verb, name, ErrDenied)
}

// authorizeSubscribe decides whether identity may subscribe to the topic
// pattern: some subscribe pattern of its rules must cover it. A denial
// wraps ErrDenied and is counted.
func (n *Node) authorizeSubscribe(identity, pattern string) error {
	return n.Authorize(identity, ActionSubscribe, pattern)
}

// authorizeInbound judges a message that arrives from a peer or a remote
// client for dest, where action (send or relay, by actionFor or the
// destination's node) is what the message does. A send to a topic of
// this node is a publish, which the publish patterns judge instead; a
// neighbour's interest (interestAddr) is never a topic, whatever the spaces
// match, so the send rule of "_petrel.topics" judges it, as documented.
func (n *Node) authorizeInbound(identity string, action Action, dest string) error {
	if n.access.rules.Load() == nil {
		return nil // no rules: no need to ask whether dest is a topic
	}
	if action == ActionSend {
		name, _, err := message.ParseDestination(dest)
		if err == nil && n.topics.isTopic(name) {
			return n.Authorize(identity, ActionPublish, dest)
		}
	}
	return n.Authorize(identity, action, dest)
}
