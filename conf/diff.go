package conf

import (
	"reflect"
	"slices"
	"strings"
)

// Diff says what differs between two configurations and how each difference
// can take effect. conf only reports; the node applies. The contract for the
// caller (the node, through Watcher's OnChange):
//
//   - Apply every section in Changed, live.
//   - Apply nothing from Restart. Those keys keep the values the process
//     started with until it restarts; report them as "needs restart".
//   - Never apply half a change: a Diff with Restart entries still carries
//     its live part in Changed, and that part is applied whole; the restart
//     part is not applied at all, not even the parts of it that look easy.
//
// A key is live when the node can apply a new value without dropping what it
// holds: addresses, routes and connectors change which links and queues
// exist, and links the change does not touch stay up. A key needs a restart
// when the node builds something once, at start, from it: the listener, the
// identity, the store.
type Diff struct {
	// Restart lists the keys, as field paths of the file ("listen",
	// "node.name", "store.sync"), whose new values take effect only after a
	// restart, in the order of the file. They were NOT applied.
	Restart []string
	// Changed lists the sections that changed and can be applied live
	// ("addresses", "routes", ...; the Section constants), in the order of
	// the file. The node re-reads each whole section from the new File.
	Changed []string
}

// The sections that Diff.Changed names. Each changes live.
const (
	// SectionSecret is the links' shared secret, secret or secret_file.
	// New handshakes use the new secret; links that are up stay up.
	SectionSecret = "secret"
	// SectionNodes is the neighbours and their connectors.
	SectionNodes = "nodes"
	// SectionRoutes is the route table.
	SectionRoutes = "routes"
	// SectionAutoCreate is auto_create.
	SectionAutoCreate = "auto_create"
	// SectionAddresses is the addresses, their roles (relay addresses
	// included) and their queue policies.
	SectionAddresses = "addresses"
	// SectionLog is the log level.
	SectionLog = "log"
	// SectionDiscovery is discovery: announcing and listening restart with
	// the new settings.
	SectionDiscovery = "discovery"
	// SectionOutboxes is the outbox folders: removed ones stop being
	// watched, new ones start (their files are sent).
	SectionOutboxes = "outboxes"
	// SectionAccess is the access rules. Each message and client request
	// is judged by the rules in force when it arrives.
	SectionAccess = "access"
	// SectionPeers is the identities that may connect. New handshakes use
	// the new list; links that are up stay up. Listing the first peers, or
	// removing the last, switches the listener's mode: the node reports
	// that as needing a restart (petrel.Reconfigured.Restart).
	SectionPeers = "peers"
)

// needsRestart marks a key of reloadRules whose change needs a restart.
const needsRestart = ""

// reloadRules says, for each key of the file, how a change to it takes
// effect: the section of Diff.Changed it belongs to, or needsRestart. A key
// that is not listed takes the rule of its nearest listed parent; a key with
// none needs a restart, so that a section added without a decision is never
// half-applied (TestReloadRulesCoverEveryKey asks for the decision).
var reloadRules = map[string]string{
	// The name and unique id are in every session the node has open; the
	// data directory holds the store and the id, opened once.
	"node": needsRestart,
	// The listener is bound at start; rebinding it would drop every
	// inbound link at once.
	"listen": needsRestart,
	// Sync mode, caps, dedupe and prefetch are set on the open database
	// and its queues.
	"store": needsRestart,
	// The log handler is built once and shared by every component; its
	// level can be a slog.LevelVar, its format cannot change under it.
	"log.format": needsRestart,
	// The admin listener is bound at start, like listen.
	"admin": needsRestart,
	// The node restarts its announcer and listener with the new settings.
	"discovery": SectionDiscovery,

	"secret":      SectionSecret,
	"secret_file": SectionSecret,
	"nodes":       SectionNodes,
	"routes":      SectionRoutes,
	// Sessions, senders and the receiver take their tuning and limits when
	// they are built; swapping them under running links is not built yet.
	"link":        needsRestart,
	"limits":      needsRestart,
	"auto_create": SectionAutoCreate,
	// The bound is read when a queue is about to be made; the node takes
	// it at start, like link's bounds.
	"max_auto_queues": needsRestart,
	"addresses":       SectionAddresses,
	// Subscriptions are checked against the spaces when they are made,
	// and a name's being a topic decides where its messages went: a
	// change applies at the next start.
	"topics":   needsRestart,
	"outboxes": SectionOutboxes,
	// The spool and chunk settings are read by the receiver and the
	// senders when they are built, like link.
	"files":     needsRestart,
	"log.level": SectionLog,
	// Certificates and keys are read once, when the node opens; the
	// listener's TLS mode is its mode for its life.
	"tls": needsRestart,
	// The rules are swapped whole; the next message or client request is
	// judged by the new ones.
	"access": SectionAccess,
	// The table of identities is swapped whole, like the access rules.
	"peers": SectionPeers,
}

// Compare returns what differs from old to new, both Files from Parse, Load
// or Default. Every difference shows up in Diff, so an empty Diff means
// the two configure the node the same way (comments, order of keys and
// spelling of values, such as 1MiB for 1048576, aside). An empty list and an
// absent one are the same. A section whose items were only reordered counts
// as changed.
func Compare(old, new *File) Diff {
	var d Diff
	d.fields("", reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem())
	return d
}

// Empty reports whether nothing differs.
func (d Diff) Empty() bool { return len(d.Restart) == 0 && len(d.Changed) == 0 }

// NeedsRestart reports whether some difference takes effect only after a
// restart.
func (d Diff) NeedsRestart() bool { return len(d.Restart) > 0 }

// String returns the diff for a log line, such as
// "changed: routes, addresses; needs restart: listen".
func (d Diff) String() string {
	var parts []string
	if len(d.Changed) > 0 {
		parts = append(parts, "changed: "+strings.Join(d.Changed, ", "))
	}
	if len(d.Restart) > 0 {
		parts = append(parts, "needs restart: "+strings.Join(d.Restart, ", "))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// fields compares the fields of two structs of the same type, key by key.
func (d *Diff) fields(path string, a, b reflect.Value) {
	t := a.Type()
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			d.compare(join(path, name), a.Field(i), b.Field(i))
		}
	}
}

// compare records the difference, if any, at the key path.
func (d *Diff) compare(path string, a, b reflect.Value) {
	section, ruled := reloadRules[path]
	if !ruled && a.Kind() == reflect.Struct {
		d.fields(path, a, b) // the rules are on its keys
		return
	}
	if sameValue(a, b) {
		return
	}
	switch {
	case ruled && section != needsRestart:
		d.Changed = appendOnce(d.Changed, section)
	case a.Kind() == reflect.Struct:
		d.restartKeys(path, a, b)
	default:
		d.Restart = appendOnce(d.Restart, path)
	}
}

// restartKeys lists each key of a restart section that differs, so the
// operator reads "store.sync", not just "store".
func (d *Diff) restartKeys(path string, a, b reflect.Value) {
	t := a.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" || sameValue(a.Field(i), b.Field(i)) {
			continue
		}
		if key := join(path, name); a.Field(i).Kind() == reflect.Struct {
			d.restartKeys(key, a.Field(i), b.Field(i))
		} else {
			d.Restart = appendOnce(d.Restart, key)
		}
	}
}

// sameValue is reflect.DeepEqual, except that an empty list equals an absent
// one ("routes: []" and no routes say the same).
func sameValue(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
