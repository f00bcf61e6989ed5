// Package receiver accepts links from other nodes: it listens on TCP, runs
// the session handshake, and turns each session's Data packets into puts on
// the receive queue of this node, or on the send queue of a relay.
//
// Invariants:
//   - A DataAck is sent only after the puts it covers committed; acks are
//     cumulative, one per group commit rather than one per packet.
//   - Every put asks for dedupe on (origin, id), so a resend after a lost
//     ack or a reconnect is stored once.
//   - A message for an address this node neither receives nor relays is
//     refused with a reason and stored nowhere.
//   - Memory per session is bounded by the window: at most Window packets
//     are between the wire and their commit.
//   - A peer that stalls or sends garbage is dropped; its goroutines end
//     with its connection.
//
// receiver imports message, address, queue and session; never sender, the
// root package or conf.
package receiver
