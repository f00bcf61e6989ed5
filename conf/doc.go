// Package conf loads and checks the YAML configuration file of a Petrel node,
// converts it into the Config of each package it configures, and watches it
// for live reload (Watch).
//
// Invariants:
//   - conf imports only what it configures (the root package, queue,
//     address, message), the table of live and restart-only settings that
//     it shares with the node (internal/reload), and fsnotify to watch the
//     file, and must not be imported by any of them: each exports its own
//     Config, so it can be embedded and tested without YAML. Only conf and
//     filetransfer import fsnotify.
//   - Every problem in a file is an *Error that names the file, line, column,
//     field path and reason, and wraps ErrInvalid (and, where a package owns
//     the rule, that package's sentinel, such as address.ErrRole or
//     address.ErrConnector). Parse returns the first problem in document
//     order.
//   - Rules across sections (a route through a node that is not in nodes, a
//     send address with no route, a node listed twice) are the node's own:
//     Parse runs petrel.Config.Validate on the converted file and reports its
//     problem at the line of the field it names, wrapping petrel.ErrConfig.
//     conf checks each value and item on its own, and does not repeat them.
//   - Unknown keys are errors, so a misspelt key is never silently ignored.
//   - A key that is absent or null takes its default. A key written with a
//     value that would be a silent "default" (a zero duration, an empty
//     name) is an error instead.
//   - conf fills in only the defaults it owns (node name, data directory,
//     auto_create, address role, log format). Every other zero means "the
//     default of the package that uses it": conf does not repeat those, so
//     they cannot drift apart. The example below shows them for reference.
//   - Parse never panics, whatever the input (FuzzParse), and its work is
//     bounded by the size of the input, aliases and merges included.
//   - Parse does no I/O beyond os.Hostname for the default node name and
//     reading the file that secret_file names.
//   - The secret never shows in a File printed with %v or %+v (Secret).
//   - A Watcher runs one goroutine, watchLoop, from Watch until Close. It
//     never replaces its configuration with one that Load refuses, and it
//     reports changes (Diff) without applying anything: the node applies the
//     live part and reports the rest as needing a restart.
//
// To add a section, add a field with its yaml tag to File and a type with a
// check method in a file of its own, list it in File.sections, and decide in
// the table of internal/reload whether it changes live. Decoding needs no
// change.
//
// # Live reload
//
// A running node watches its file (Watch) and reloads it shortly after it is
// saved. Whatever way the editor saves it (writing it in place, truncating
// then writing, writing a temporary file and renaming it over, renaming the
// old one to a backup first, or swapping a symlink, as a Kubernetes ConfigMap
// does), the burst of file events gives one reload, once the file has been
// quiet for 200ms. Touching the file makes the node read it again, and the
// files that secret_file and token_file name with it. Where the file is a
// symlink, a change of the link, or of its target in the same directory, is
// seen; an edit in place of a target in another directory is not, until the
// file is touched. The files that secret_file and token_file name are
// watched the same way, in their own directories: a secret rotated by
// rewriting its file, or by a Kubernetes secret volume's update, reloads
// the configuration without an edit of it.
//
// These keys change live, without a restart; links that a change does not
// touch stay up:
//
//	addresses        addresses, their roles (relay addresses included) and
//	                 their queue policies
//	nodes            neighbours and their connectors
//	routes           the route table
//	secret           secret and secret_file; new handshakes use the new secret
//	discovery        announcing and listening restart with the new settings
//	auto_create      whether undeclared addresses are created on first use
//	access           the access rules; each message is judged by the rules in
//	                 force when it arrives
//	peers            the identities that may connect; new handshakes use the
//	                 new list (listing the first or removing the last peer
//	                 switches the listener's mode and takes a restart)
//	log.level        the log level
//
// These keys need a restart. A change to them is logged and shown as "needs
// restart", and is not applied, not even in part, until the node restarts:
//
//	node.name        the node's identity, in every session it has open
//	node.data_dir    where the store and the unique id are
//	listen           the listener, bound at start
//	store.*          every key of store: sync, caps, dedupe, prefetch
//	link.*           window, frame size, timeouts, backoff and the bounds on
//	                 inbound connections
//	max_auto_queues  the bound on undeclared queues
//	limits.*         bounds on the messages the node accepts
//	log.format       the log handler shared by every component
//	admin.*          the admin HTTP listener, bound at start, its token (the
//	                 file is read at start) and its checks
//	tls.*            certificates and keys, read at start, and the listener's
//	                 TLS mode
//	topics           the topic spaces: whether a name is a topic decides
//	                 where its messages went
//
// An edit that mixes both kinds applies its live part and reports the rest.
//
// A bad edit (broken YAML, an invalid value, an impossible route) is refused
// with the file, line and reason, and the node keeps running the
// configuration it has; the next good save is loaded as usual. An empty file
// is refused too: at start it means the defaults, but on a running node it is
// almost always an editor between truncating and writing it. To go back to
// the defaults, leave a comment in the file. A file that disappears is
// reported only if it is still missing when the burst is over, and the node
// keeps its configuration then too. `petrel stat` shows the version of the
// configuration (1 at start, one more for each change loaded), when it was
// loaded, and why the last edit was refused, until a good one replaces it.
package conf
