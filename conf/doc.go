// Package conf loads and checks the YAML configuration file of a Petrel node
// and converts it into the Config of each package it configures. (Watching
// the file for hot reload comes later, in this package too.)
//
// Invariants:
//   - conf imports only what it configures (the root package, queue,
//     address, message; later fsnotify to watch the file) and must not be
//     imported by any of them: each exports its own Config, so it can be
//     embedded and tested without YAML.
//   - Every problem in a file is an *Error that names the file, line, column,
//     field path and reason, and wraps ErrInvalid (and, where a package owns
//     the rule, that package's sentinel, such as address.ErrRole). Parse
//     returns the first problem in document order.
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
//   - Parse does no I/O beyond os.Hostname for the default node name.
//
// To add a section, add a field with its yaml tag to File and a type with a
// check method in a file of its own, and list it in File.sections. Decoding
// needs no change.
//
// The complete file follows (example.yaml in this directory, which the tests
// parse). Every key is set to its default, except the node name and the
// addresses, which are examples.
//
//	# Petrel node configuration: every key, with its type, default and meaning.
//	#
//	# Every key is optional: a node starts with no file at all. A key that is left
//	# out, or has no value, takes its default. Unknown keys are errors, so a typo
//	# never goes unnoticed. Sizes are bytes (1048576) or a number with a unit:
//	# B; K, KiB, Ki = 1024; KB = 1000; M/MiB/Mi, MB; G/GiB/Gi, GB; T..., P...
//	# (case-insensitive; a bare K, M, G, T or P is binary). Durations are a number
//	# with a unit: 500ms, 30s, 5m, 1h30m. Enumerated values are lowercase.
//	# Top-level keys starting with "x-" are ignored, to hold YAML anchors that
//	# addresses can merge with "<<: *name".
//
//	node:
//	  # Name of this node, unique among the nodes it talks to (string). 1 to 128
//	  # letters, digits, '.', '_' or '-', not starting with '.' or '-'.
//	  # Default: the host name, with other characters replaced by '-'.
//	  name: plant-7
//	  # Directory of the node's database and unique id (string). Relative to the
//	  # working directory. Default: petrel-data.
//	  data_dir: petrel-data
//
//	store:
//	  # When a commit reaches the disk (full | normal). full fsyncs every commit:
//	  # nothing acknowledged is lost on power loss. normal may lose the last
//	  # commits on power loss, never on a process crash. Default: full.
//	  sync: full
//	  # Most bytes of stored messages (size). 0 means no cap. Default: 0.
//	  max_bytes: 0
//	  # Most stored messages (integer). 0 means no cap. Default: 0.
//	  max_messages: 0
//	  # What a send does past max_bytes or max_messages (error | block). error
//	  # fails it at once; block waits for space. Default: error.
//	  on_full: error
//	  # How long a queue remembers a message's (origin, id) to drop resends
//	  # (duration). Default: 24h.
//	  dedupe_window: 24h
//	  # Most remembered (origin, id) pairs per queue, oldest forgotten first
//	  # (integer). Default: 1000000.
//	  dedupe_max_entries: 1000000
//	  # Period of the sweep that removes expired messages, times out leases and
//	  # forgets old dedupe entries (duration). Default: 1s.
//	  sweep_interval: 1s
//	  # Most messages per queue held in memory ready for consumers (integer);
//	  # the rest wait on disk. Default: 1024.
//	  prefetch_messages: 1024
//	  # Most bytes per queue held in memory ready for consumers (size).
//	  # Default: 4MiB.
//	  prefetch_bytes: 4MiB
//
//	limits:
//	  # Bounds on every message this node accepts, checked before anything is
//	  # allocated. 0 means the default; a value above what the wire format
//	  # carries is lowered to that (4GiB-1 bytes, or 65535 for the counts).
//	  # Most bytes of a message body (size). Default: 8MiB.
//	  max_body: 8MiB
//	  # Most application properties on one message (integer). Default: 64.
//	  max_properties: 64
//	  # Most bytes of one property, key and value (size). Default: 64KiB.
//	  max_property_bytes: 64KiB
//	  # Most bytes of a destination or kind-property string (integer).
//	  # Default: 4096.
//	  max_header_string: 4096
//
//	# Whether a send or consumer on an undeclared local address creates it as a
//	# receive address (bool). false refuses it. Default: true.
//	auto_create: true
//
//	# The addresses of this node (list). Names are unique, 1 to 128 letters,
//	# digits, '.', '_' or '-'. The policy keys below max_deliveries apply to
//	# receive addresses only; expiry_address applies to any.
//	addresses:
//	  - # Name of the address, without "@node" (string, required).
//	    name: orders
//	    # What this node does with it (receive | send | relay). receive: consumed
//	    # here. send: forwarded toward the node that hosts it. relay: passed on
//	    # toward its destination for other nodes. Default: receive.
//	    role: receive
//	    # Deliveries of a message before it moves to dead_letter (integer, at
//	    # least 1). Default: 10.
//	    max_deliveries: 10
//	    # Address that takes messages past max_deliveries (string).
//	    # Default: the name followed by ".dlq".
//	    dead_letter: orders.dlq
//	    # Address that takes expired messages (string). Default: none; expired
//	    # messages are dropped and counted.
//	    expiry_address: orders.expired
//	    # How long a delivered message may go unacknowledged before it is
//	    # delivered again (duration). Default: 30s.
//	    lease_timeout: 30s
//	    # Wait before redelivering a nacked message; doubles with each delivery
//	    # (duration). Default: 1s.
//	    redelivery_delay: 1s
//	    # Most wait before a redelivery (duration, at least redelivery_delay).
//	    # Default: 1m.
//	    max_redelivery_delay: 1m
//	  - name: orders.dlq
//	  - name: orders.expired
//	  - name: billing
//	    role: send
//	  - name: telemetry
//	    role: relay
//
//	log:
//	  # Least severe level logged (debug | info | warn | error). Default: info.
//	  level: info
//	  # text writes key=value lines; json writes one object per line
//	  # (text | json). Default: text.
//	  format: text
package conf
