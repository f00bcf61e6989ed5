// Package receiver accepts links from other nodes: it listens on TCP, runs
// the session handshake, and turns each session's Data packets into puts on
// the receive queue of this node, or on the send queue of a relay. It also
// serves clients, processes that are not nodes, through a ClientRouter:
// their publish sessions are taken as links' sessions are, each message
// routed by its own destination, and their subscribe sessions are served
// from a receive queue (subscribe.go): an address's, or a topic
// subscription's (session.FlagTopic), which the router releases when the
// session ends.
//
// Invariants:
//   - A DataAck is sent only after the puts it covers committed; acks are
//     cumulative, one per group commit rather than one per packet.
//   - Every put asks for dedupe on (origin, id), so a resend after a lost
//     ack or a reconnect is stored once.
//   - A message for an address this node neither receives nor relays is
//     refused with a reason and stored nowhere.
//   - A file message is taken only as the announcement of a file session;
//     in any other session it is refused for good (refuse.go). Its path
//     properties are cleared on arrival: the node names its own copy.
//   - Memory per session is bounded by the window: at most Window packets
//     are between the wire and their commit.
//   - A peer that stalls or sends garbage is dropped; its goroutines end
//     with its connection.
//   - A subscribe session pushes only as far as the client's credit goes
//     and holds at most four windows of leases; when it ends, every lease
//     it holds goes back to its queue, after the settles that arrived
//     before the end are applied.
//   - Connections in their handshake (in total and per remote IP) and
//     connections open are bounded (limits.go); one past a bound is closed
//     by the accept loop before any goroutine starts, and counted; the logs
//     about them are rate-limited.
//   - A file that does not fit in the spool quota pauses, as on a full disk;
//     one larger than the quota is refused for good (quota.go).
//   - With Config.TLS the listener speaks only TLS. The TLS handshake is
//     bounded by the handshake timeout like the session handshake, and a
//     client whose certificate was verified must claim its Common Name as
//     its node name.
//   - A Router that implements Interceptor (intercept.go) sees each
//     connection once its identity is proven, each whole message of a
//     link or a client's publish before it is routed, and each message
//     pushed to and settled by a client. Without it, nothing is decoded
//     beyond the header routing needs.
//
// receiver imports message, address, queue and session; never sender, the
// root package or conf.
package receiver
