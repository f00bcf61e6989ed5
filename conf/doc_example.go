// The package documentation goes on here with the complete example file:
// go doc shows this comment after doc.go's, in the order of the file names.
// TestExampleFile checks that it matches example.yaml.

// # The file
//
// The complete file follows (example.yaml in this directory, which the tests
// parse). Every key is set to its default, except the node name, listen,
// secret, nodes, routes, addresses, admin.listen, tls and access, which are
// examples.
// `petrel node` serves the admin HTTP endpoint only when admin.listen is set;
// leave it out to keep it off.
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
//	# Host and port that this node accepts links from other nodes on (string,
//	# host:port). An empty host (:7400) listens on every interface; port 0 takes
//	# a free port, which petrel node prints on its ready line. A change takes a
//	# restart. Default: none; the node accepts no links, but still opens links to
//	# the nodes below.
//	listen: 127.0.0.1:7400
//
//	# Shared secret of links (string). When set, each side of a link proves that
//	# it knows the secret, with a fresh challenge, before any queue is touched;
//	# the nodes of a network share one. Default: none; links are not
//	# authenticated.
//	secret: change-me
//	# Or the path of a file that holds the secret (string), read when the
//	# configuration is loaded, without its trailing newline. Relative to the
//	# working directory. Set secret or secret_file, not both. Default: none.
//	# secret_file: /etc/petrel/secret
//
//	# Other nodes that this node reaches directly, its neighbours (list). Names
//	# are unique, and not this node's own. Default: none.
//	nodes:
//	  - # Name of the node, as that node calls itself (string, required).
//	    name: hub-1
//	    # How to reach it (string, required): tcp://host:port, or
//	    # tls://host:port; options go as query parameters (?key=value&...).
//	    # An IPv6 host goes in brackets: tcp://[::1]:7401. A list tries several:
//	    # static:(c1,c2,...) each in turn; failover:(main,backup) the backup while
//	    # the main is down, then the main again. Quote a list inside {...}.
//	    connector: tcp://127.0.0.1:7401
//	    # The secret this node proves to it when dialing it (string): this
//	    # node's own entry in that node's peers. Or secret_file, the path of a
//	    # file that holds it. Default: this node's peers entry for that node if
//	    # it has a secret, else the shared secret.
//	    # secret_file: /etc/petrel/hub-1.secret
//	  - name: hub-2
//	    connector: failover:(tcp://10.0.0.2:7400,tcp://10.0.1.2:7400)
//
//	# How to reach nodes that are not neighbours (list). Default: none; only
//	# neighbours are reached.
//	routes:
//	  - # The node the route leads to (string, required), one route per node.
//	    node: plant-9
//	    # The neighbour that carries its traffic (string, required, listed in
//	    # nodes). It passes the traffic on if it declares the address as a relay
//	    # address.
//	    via: hub-1
//
//	link:
//	  # Data packets a sender keeps unacknowledged in flight per session
//	  # (integer, at least 1). Default: 4096.
//	  window: 4096
//	  # Bytes of those packets' messages a sender keeps in flight per session
//	  # (size, more than 0). A sender under it sends its next message whatever
//	  # its size. Default: 16MiB.
//	  window_bytes: 16MiB
//	  # Longest frame accepted; a longer one closes the connection (size, at most
//	  # 4GiB-1). A frame holds one whole message, so keep it above
//	  # limits.max_body. Default: 16MiB.
//	  max_frame: 16MiB
//	  # Most time to connect, authenticate and open a session (duration).
//	  # Default: 10s.
//	  handshake_timeout: 10s
//	  # Most time one write to a peer may take (duration). Default: 10s.
//	  write_timeout: 10s
//	  # A peer silent this long is dropped; heartbeats keep a healthy link busy
//	  # (duration). Default: 30s.
//	  idle_timeout: 30s
//	  # First wait before a sender reconnects, doubled after each failure, with
//	  # jitter (duration, at most reconnect_max). Default: 100ms.
//	  reconnect_min: 100ms
//	  # Longest wait before a sender reconnects (duration). Default: 1s.
//	  reconnect_max: 1s
//	  # How long a sender's full window may go without an ack before its link
//	  # is reported stalled ("(stalled)" in petrel stat, stalled in the admin
//	  # API's links): connected, yet nothing moves (duration). Default: 10s.
//	  stall_after: 10s
//	  # Inbound connections still in their TLS or session handshake, from every
//	  # address together (integer, at least 1). A connection past it is closed
//	  # as soon as it is accepted, counted and logged at most once every 10s.
//	  # Default: 256.
//	  max_handshakes: 256
//	  # The same, from one remote IP address (integer, at least 1), so that one
//	  # host cannot take every handshake slot. Default: 16.
//	  max_handshakes_per_ip: 16
//	  # Inbound connections open at once, in their handshake or authenticated
//	  # (integer, at least 1). Default: 1024.
//	  max_connections: 1024
//	  # Bytes of received messages one inbound connection holds before they are
//	  # stored (size, at least twice max_frame). Past it the node stops reading
//	  # that connection until it has stored some, so a slow disk slows the peer
//	  # instead of growing memory. Default: 64MiB.
//	  max_conn_buffer_bytes: 64MiB
//	  # Bytes of the messages one remote client's consumer or subscription holds
//	  # delivered and not yet settled (size, more than 0): each keeps its message
//	  # in this node's memory. At the bound the node delivers nothing more to it
//	  # until it settles, or its leases time out; under it the next message goes
//	  # whatever its size. Default: 8MiB.
//	  max_subscription_held_bytes: 8MiB
//	  # The same, for every remote consumer together (size, more than 0); a
//	  # consumer that holds nothing still takes one message. Default: 256MiB.
//	  max_held_bytes: 256MiB
//	  # Publish and subscribe sessions one client identity (kind: client in peers)
//	  # holds open at once, across all its connections and Dials: one for each
//	  # client's producers and one per consumer or subscription (integer, at
//	  # least 1). A session past it is refused with the reason, counted and
//	  # logged at most once every 10s per identity. Node identities are not
//	  # bounded: their links carry one session per send queue. Default: 4096.
//	  max_sessions_per_identity: 4096
//	  # Inbound connections one client identity holds open at once (integer, at
//	  # least 1). A client Dial opens one, and one more for each 1,023 consumers
//	  # past the first connection's; one past the bound is refused at its
//	  # handshake with the reason. Default: 64.
//	  max_connections_per_identity: 64
//
//	discovery:
//	  # Find other nodes by UDP announcements, and be found (bool). A discovered
//	  # node is reachable without configuration; a node in nodes of the same
//	  # name wins. Default: false.
//	  enabled: false
//	  # Where announcements go (string, ip:port): a broadcast address, such as
//	  # 127.255.255.255:7401 on one machine's loopback or 255.255.255.255:7401 on
//	  # a LAN, or a multicast group such as 239.255.74.1:7401. Default: the
//	  # address package's, 255.255.255.255:7401.
//	  group: 127.255.255.255:7401
//	  # Network interface to announce and listen on (string), such as lo or eth0.
//	  # Default: none; the routing table chooses.
//	  interface: ""
//	  # How often this node announces itself (duration). Default: 2s.
//	  period: 2s
//	  # How long a node stays known without being heard; longer than period
//	  # (duration). Default: 10s.
//	  timeout: 10s
//	  # Connector other nodes reach this one by (string, a connector as in
//	  # nodes). Default: tcp:// and the listen address, which must then name a
//	  # host, not every interface.
//	  advertise: tcp://127.0.0.1:7400
//	  # Most discovered nodes kept (integer, at least 1). Announcements from
//	  # further new nodes are dropped and counted; known nodes keep refreshing.
//	  # Default: 1024.
//	  max_nodes: 1024
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
//	  # the rest wait on disk. Default: 8192.
//	  prefetch_messages: 8192
//	  # Most bytes per queue held in memory ready for consumers (size).
//	  # Default: 4MiB.
//	  prefetch_bytes: 4MiB
//	  # Most bytes that all queues together hold in memory ready for
//	  # consumers, each message counted with its bookkeeping (size); past it
//	  # a queue reads 16 messages at a time from disk. Default: 64MiB.
//	  prefetch_total_bytes: 64MiB
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
//	# Most undeclared receive queues, made by auto_create for peers, clients and
//	# this node's own producers and consumers (integer, at least 1). Past it, a
//	# message from a peer to a new undeclared address is refused for good, with
//	# the reason; declared addresses never count. Default: 10000.
//	max_auto_queues: 10000
//	# Most topic subscriptions, durable or not, that the remote clients of one
//	# identity own at once (integer, at least 1). Past it, that identity's
//	# subscribe to a new name is refused, with the reason; joining its own is
//	# taken. Default: 1000, or a tenth of max_auto_queues where that is less.
//	max_subscriptions_per_identity: 1000
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
//	    # Node that hosts a send address (string): required for send addresses,
//	    # refused for the others. It must be in nodes or routes. A message put on
//	    # billing here goes to billing@plant-9.
//	    node: plant-9
//	  - name: telemetry
//	    role: relay
//
//	# Topic spaces (list). An address name that a space's pattern matches is a
//	# topic: a publish to it goes to every subscription whose pattern matches,
//	# in one transaction, and is dropped and counted when none does. Declared
//	# addresses may not be topics. Topics are not created by auto_create.
//	topics:
//	  - # Pattern of the space's names (string, required): dot-separated words,
//	    # '*' for exactly one word, '#' for zero or more.
//	    pattern: events.#
//	    # Most messages each subscription of the space holds, waiting or in
//	    # flight (integer). A copy for a subscription at it is dropped and
//	    # counted; the publish still reaches the other subscriptions, so one
//	    # subscription nobody consumes cannot fill the store. Default: 0, no
//	    # bound but the store's.
//	    max_queued_messages: 0
//	    # Which copies go past max_queued_messages (drop_new | drop_oldest).
//	    # drop_new drops the copy that would pass it, as Mosquitto does;
//	    # drop_oldest keeps it and drops the subscription's oldest messages not
//	    # in flight, just after, so a subscriber that returns gets the latest.
//	    # Default: drop_new.
//	    overflow: drop_new
//	    # Hold the publishes that match no subscription, for the durable
//	    # subscriptions made later (mapping). A new durable subscription takes
//	    # the held publishes its pattern matches. Default: none; they are
//	    # dropped.
//	    keep:
//	      # At most this many are held (integer, required); past it the oldest
//	      # is dropped, counted.
//	      messages: 10000
//	      # None older than this is held (duration). Default: no age limit.
//	      age: 24h
//
//	# How long a neighbour may be unreachable (no link up either way) before
//	# the non-durable topic interest learned from it is dropped, with the
//	# publishes that wait toward it for that interest alone, counted
//	# (duration). Durable interest is kept whatever the outage. Default: 5m.
//	topic_interest_grace: 5m
//
//	# How many topic publishes may wait toward one neighbour, sent or not, for
//	# the interest learned from it; past it a publish gets no copy toward that
//	# neighbour, counted in petrel_queue_overflowed_total, and still goes to the
//	# others (count, at least link.window). Default: 0, none but the store's
//	# bound: durable interest keeps every publish while its site is away.
//	topic_forward_max_queued: 0
//	# Which publishes go past topic_forward_max_queued: drop_new keeps the first,
//	# drop_oldest the latest (interest messages always stay). Default: drop_new.
//	topic_forward_overflow: drop_new
//
//	files:
//	  # Where files being received are kept until whole and verified, and where
//	  # a relay holds the files it forwards (path). Keep it on the filesystem of
//	  # the received folders: delivery is then a link, not a copy. Default:
//	  # <data_dir>/spool.
//	  spool: /var/lib/petrel/spool
//	  # Folder under which each address's received files are placed, one
//	  # subfolder per address (path). Default: <data_dir>/received.
//	  received: /var/lib/petrel/received
//	  # Content bytes per chunk packet (size, at most link.max_frame - 8).
//	  # Default: 512KiB (or max_frame - 8 if less).
//	  chunk_size: 512KiB
//	  # Most chunks in flight per transfer (integer, at least 1); on a long fat
//	  # link raise it to cover the bandwidth-delay product. Default: 16.
//	  window: 16
//	  # Files of one send queue that move at once (integer, at least 1); the
//	  # queue's other messages never wait for files. Default: 4.
//	  concurrency: 4
//	  # Most bytes a receiver appends between two syncs and acknowledgements
//	  # (size). Default: 16MiB.
//	  sync_bytes: 16MiB
//	  # How long a partly received file may go without progress before the spool
//	  # drops it, its sender presumed gone (duration). Default: 168h (7 days).
//	  abandon_after: 168h
//	  # Most spool space the files being received take, each counted at its
//	  # announced size from its first byte until it leaves the spool (size). A
//	  # file that does not fit now is paused, and its sender tries again until
//	  # there is room; one larger than the quota is refused for good, with the
//	  # reason. Default: 64GiB.
//	  max_spool_bytes: 64GiB
//	  # Most of it the files from one peer take (size, at most max_spool_bytes).
//	  # Default: half of max_spool_bytes.
//	  max_spool_bytes_per_peer: 32GiB
//	  # Write received files through the page cache only, never with O_DIRECT,
//	  # for a spool on a filesystem whose direct writes are slow (bool). By
//	  # default, on Linux, chunks go to the disk with O_DIRECT where the
//	  # filesystem takes it. Default: false.
//	  buffered_writes: false
//
//	outboxes:
//	  - # Folder watched (path, required). A file dropped in is sent once it is
//	    # complete: renamed from name.part to name, or unchanged and closed for
//	    # quiet. Files there at startup are sent too. One outbox per folder,
//	    # however its path is spelled, and none in another's sent/ or failed/.
//	    dir: /var/spool/petrel/out/billing
//	    # Address its files go to (name@node or a local name, required).
//	    to: invoices@plant-9
//	    # What happens to a file once the next hop has it (sent | delete): sent
//	    # moves it to <dir>/sent. A file that fails moves to <dir>/failed with
//	    # <name>.reason beside it. Default: sent.
//	    after: sent
//	    # How long a file must stay unchanged before it counts as complete
//	    # (duration). Default: 2s.
//	    quiet: 2s
//
//	log:
//	  # Least severe level logged (debug | info | warn | error). Default: info.
//	  level: info
//	  # text writes key=value lines; json writes one object per line
//	  # (text | json). Default: text.
//	  format: text
//
//	admin:
//	  # Host and port of the admin HTTP endpoint (string, host:port): /healthz,
//	  # /readyz, /metrics (Prometheus), /api/status (the JSON of petrel stat)
//	  # and the admin API of petrel send, recv, queues, purge, dlq and sendfile.
//	  # Every request must name this address (or localhost, on loopback, or one
//	  # of hosts) in its Host header, and POSTs must be application/json. A host
//	  # other than loopback needs token_file: the node refuses to start without
//	  # it. Port 0 takes a free port. A change takes a restart. Default: none;
//	  # no admin listener (petrel stat still works, through the unix socket
//	  # petrel.sock in the data directory, which asks no token: reaching it
//	  # takes the node's user).
//	  listen: 127.0.0.1:7480
//	  # Path of a file holding the bearer token that every request must carry
//	  # (Authorization: Bearer <token>), except /healthz, /readyz and /metrics
//	  # (string). Read at start without its trailing newline; at least 16
//	  # printable characters (openssl rand -hex 32). The file must be closed to
//	  # group and others (chmod 600), or the node refuses to start. The CLI
//	  # reads it from --token-file or PETREL_ADMIN_TOKEN. Default: none; no
//	  # token asked, allowed on loopback only.
//	  # token_file: /etc/petrel/admin.token
//	  # Whether /metrics asks for the token too (bool). Default: false.
//	  metrics_auth: false
//	  # More names the Host header may carry (list of host or host:port), for
//	  # a listener reached by a DNS name or through a proxy. A name without a
//	  # port is allowed on any port. Default: none; only the listen address
//	  # (every interface address for 0.0.0.0) and, on loopback, localhost.
//	  hosts: []
//	  # Directories whose files POST /api/files (petrel sendfile --server) may
//	  # send when it comes over TCP (list of absolute paths); links are
//	  # resolved, and a file outside them is refused (403). Default: none; the
//	  # TCP listener sends no files. The unix socket sends any file the node's
//	  # user can read.
//	  file_roots: []
//
//	# TLS for links (mapping). The files are read when the node starts, relative
//	# to the working directory; a change takes a restart. A shared secret, if
//	# set, is still proven inside TLS. Default: none; links are plain TCP.
//	tls:
//	  # This node's certificate in PEM, its chain after it (path). With key, the
//	  # listener speaks only TLS, so a plain TCP peer is refused (give plain
//	  # nodes a listener of their own), and it is the client certificate when
//	  # dialing tls:// connectors. Set cert and key, or neither. Default: none.
//	  cert: /etc/petrel/plant-7.pem
//	  # The private key of cert, in PEM (path). Default: none.
//	  key: /etc/petrel/plant-7.key
//	  # Authorities that sign peers' certificates, in PEM (path): they verify
//	  # the servers dialed over tls://, and the clients when client_auth is
//	  # require_and_verify. Default: the system's roots, for servers only.
//	  ca: /etc/petrel/ca.pem
//	  # What the listener asks of its clients (none | request |
//	  # require_and_verify). require_and_verify is mutual TLS: a client needs a
//	  # certificate signed by ca, and the node name it claims must be the
//	  # certificate's Common Name. request asks for a certificate but verifies
//	  # nothing. Default: none.
//	  client_auth: require_and_verify
//	  # Name the servers' certificates must carry (string), instead of the host
//	  # of each tls:// connector; a connector's own ?server_name=... wins.
//	  # Default: none; the host of the connector.
//	  # server_name: hub-1.example.com
//
//	# Access rules: what other nodes and clients may do with this node's
//	# addresses (list). With no rules, everything is allowed. With rules, a peer
//	# may do an action on an address only if a rule for its name, or for "*",
//	# lists a pattern matching the address under that action; anything else is
//	# refused for good, with the reason (a message goes to the sender's
//	# dead-letter address), and counted. This node's own producers and consumers
//	# are never subject to them. A change applies live. Default: none.
//	access:
//	  - # Who the rule is for (string, required): the name a peer proved with
//	    # the secret (with client_auth require_and_verify, also its
//	    # certificate's Common Name), or "*" for any peer (quoted). A message
//	    # comes from the node at the other end of the link: a relay, for
//	    # relayed traffic, not the origin.
//	    identity: hub-1
//	    # Addresses it may send to, received here (list of patterns). A pattern
//	    # is an address name, a prefix ending in "*" ("orders.*" matches
//	    # orders.eu, not orders), or "*" for every address (quoted).
//	    # Default: none.
//	    send: [orders, orders.*]
//	    # Addresses it may consume from, as a remote client (list of patterns).
//	    # Default: none.
//	    consume: [billing]
//	    # Addresses whose messages it may have this node pass on toward other
//	    # nodes (list of patterns, matching the name without "@node"; the
//	    # address must also be a relay address). Default: none.
//	    relay: [telemetry]
//	    # Topics it may publish to (list of topic patterns: dot-separated
//	    # words, "*" for one word, "#" for zero or more; "orders.#" matches
//	    # orders.eu.created). A send pattern does not reach a topic.
//	    # Default: none.
//	    publish: [orders.#]
//	    # Topic patterns it may subscribe to, as a remote client (list of topic
//	    # patterns). One must cover the whole pattern asked for: "orders.#"
//	    # covers orders.eu.*; "orders.*" does not cover orders.#. Default: none.
//	    subscribe: [orders.#]
//	  - identity: "*"
//	    send: [public.*]
//
//	# Identities that may connect to this node, each with its own credentials
//	# (list). Listing any turns the shared secret off for the listener: only the
//	# identities listed connect, each proving its own secret (or, with
//	# tls.client_auth require_and_verify, its certificate, whose Common Name is
//	# its name). Names are unique and valid node names. A change applies live;
//	# listing the first or removing the last takes a restart. Default: none; the
//	# shared secret mode, for a trusted network only.
//	# peers:
//	#   - # The identity (string, required): a node's name, a client's name, or
//	#     # the Common Name of its certificate.
//	#     name: hub-1
//	#     # The path of a file that holds its secret (string), or secret: inline.
//	#     # Required unless client certificates are verified.
//	#     secret_file: /etc/petrel/peers/hub-1.secret
//	#     # node or client (string). A client may only publish and subscribe,
//	#     # with its own id as the origin. Default: node.
//	#     kind: node
//	#     # Whether it may hand over messages other nodes made (bool): a hub
//	#     # that relays its plants' traffic. It can then speak for any origin.
//	#     # Default: false; only messages of its own origin are taken from it.
//	#     relay: true
//	#     # The node id it must prove (32 hex digits, its node.id file).
//	#     # Default: the id it proves at its first connection, kept in the data
//	#     # directory (peer-ids.json).
//	#     # id: 0123456789abcdef0123456789abcdef
//	#   - name: app-1
//	#     secret_file: /etc/petrel/peers/app-1.secret
//	#     kind: client
//
//	# A live/backup pair on a shared data directory (mapping). Both nodes run
//	# this file, with the same name and data_dir, on machines that mount the
//	# same volume (a SAN volume or DRBD; not NFS, see the README). Each takes an
//	# exclusive lock on the lock file before it opens the store: the live at
//	# once, or it exits; the backup waits for it, and when the live's process
//	# dies, opens the store, listens and announces itself as the node. A change
//	# takes a restart. Default: none; a standalone node, no lock.
//	# ha:
//	#   # live or backup (string, required).
//	#   role: live
//	#   # Name of the lock file in the data directory (string). Default: ha.lock.
//	#   lock: ha.lock
//	# The MQTT listener (mapping). MQTT 3.1.1 and 5 clients publish to and
//	# subscribe to this node's topics (topics: above); see the README's MQTT
//	# section. A change takes a restart. Default: none; no MQTT listener.
//	# mqtt:
//	#   # Host and port MQTT clients connect to (string, host:port); port 0
//	#   # takes a free one, printed as mqtt= on the ready line.
//	#   listen: 0.0.0.0:1883
//	#   # Whether the MQTT listeners speak TLS with the certificate of tls:
//	#   # (bool), and its client_auth: with require_and_verify, a client
//	#   # certificate's Common Name is the identity. Default: false.
//	#   tls: false
//	#   # Host and port of an MQTT over WebSocket listener (string): any path,
//	#   # subprotocol mqtt; wss:// when tls is true. Default: none.
//	#   websocket: 0.0.0.0:8083
//	#   # QoS 1 and 2 deliveries awaiting each client's acknowledgement (int,
//	#   # 1 to 65535; the client's Receive Maximum lowers it). Default: 100.
//	#   max_inflight: 100
//	#   # MQTT clients connected at once (int); one more is refused at CONNACK
//	#   # (MQTT 5: 0x97 quota exceeded, 3.1.1: server unavailable). Default: 1024.
//	#   max_clients: 1024
//	#   # Topics holding a retained message (int); a retained publish to a new
//	#   # topic past it is refused (MQTT 5: 0x97; 3.1.1: the connection is
//	#   # closed), replacing one is taken. Default: 10000.
//	#   max_retained: 10000
//	#   # Bytes of the retained messages, their payloads and topics (size),
//	#   # which the node keeps in memory; a retained publish that would grow
//	#   # them past it is refused as above. Default: 64MiB.
//	#   max_retained_bytes: 64MiB
//	#   # Persistent sessions kept, connected or not (int); a connection that
//	#   # would add one more is refused at CONNACK (MQTT 5: 0x97; 3.1.1: server
//	#   # unavailable). Default: 10000.
//	#   max_sessions: 10000
//	#   # Topic filters one client holds (int); each new filter of a SUBSCRIBE
//	#   # past it is refused (MQTT 5: 0x97; 3.1.1: 0x80), the others taken. A
//	#   # persistent session's filters are resumed whatever the bound. Default: 100.
//	#   max_subscriptions: 100
//	#   # How long a persistent session outlives its connection at most
//	#   # (duration, whole seconds): an MQTT 5 client asking more is told this in
//	#   # CONNACK; an MQTT 3.1.1 session ends this long after its client left.
//	#   # Default: 168h.
//	#   max_session_expiry: 168h
//	#   # How often the $SYS/broker/... topics are published (duration, whole
//	#   # seconds). A client reads them if its identity may subscribe to every
//	#   # topic ('#'); with no access rules, every client. Default: 10s.
//	#   sys_interval: 10s
package conf
