// Package address holds what a node knows about names and about how to reach
// other nodes:
//
//   - role.go: the role an address plays on this node (receive, send,
//     relay);
//   - connector.go, connectors.go: connector URIs (tcp://host:port,
//     tls://host:port?opt=v, static:(...), failover:(...)), parsed into
//     Connectors with a canonical String;
//   - topic.go: topic names and patterns ('*' one word, '#' zero or
//     more, AMQP semantics): validation, matching, and whether a pattern
//     lies within a declared topic space;
//   - routes.go: the route table, which answers "which neighbour carries
//     traffic for node X";
//   - directory.go: the node directory, the entries (name, id, connectors,
//     source, last seen) of the nodes this node can reach, static from the
//     configuration or discovered, and expired when not heard;
//   - announce.go, announce_connectors.go: the discovery announcement, its
//     byte layout (drawn there, pinned by testdata/announce) and its
//     mapping to and from Connectors;
//   - discovery.go, announcer.go, listener.go: UDP broadcast or multicast
//     discovery: the Announcer sends this node's announcement every period,
//     the Listener feeds the Directory and expires silent nodes.
//
// Invariants:
//   - address imports only message and the standard library. It knows
//     nothing of YAML or sessions: conf turns the file into these types, and
//     sender and receiver dial and listen. Its only sockets are discovery's
//     UDP ones, and the goroutines that read and write them are owned by
//     an Announcer or a Listener and end at Stop.
//   - A discovery packet, whatever its bytes, never panics the decoder and
//     never changes the directory unless it is a valid announcement, signed
//     with the secret when there is one (FuzzDecodeAnnouncement).
//   - The directory keeps at most MaxNodes discovered entries; an
//     announcement from a new id past it is dropped and counted, so a flood
//     of invented ids costs no memory.
//   - Parsers never panic, whatever their input (FuzzParseConnectors). Each
//     error wraps this package's sentinel for what was parsed (ErrRole,
//     ErrConnector), in a message that names the input and what is wrong.
//   - A connector that parsed prints in canonical form, and that form parses
//     back to an equal value, so a connector can be compared, logged and
//     announced as text.
//   - Routes is immutable, and NextHop only ever answers a neighbour. The
//     Directory is safe for concurrent use, and a static entry wins over
//     discovered ones of the same name.
package address
