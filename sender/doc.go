// Package sender forwards send queues to the next hop. There is one Sender
// per send queue; the senders to one neighbour share one connection from
// the Pool, each in its own session.
//
// Invariants:
//   - A message leaves its send queue only when the next hop acked it, that
//     is, committed it (custody). A message the next hop refused for good
//     moves to the queue's dead-letter queue with the reason.
//   - At most Window messages are in flight per session. When a session
//     ends, every message in flight goes back to the queue and is sent
//     again, in its original order, on the next session; the next hop's
//     dedupe drops what it already had.
//   - A file leaves its send queue only when the next hop acked its whole
//     size, which it does only once it verified the file. A file stored
//     before its checksum was known is announced without it, and its
//     checksum (Checksums, or the sender's own hash after a restart) is
//     sent after the last chunk; if there is none (the hash failed), the
//     transfer is aborted and the file message fails.
//   - An expired message is never forwarded; a forwarded message carries
//     its remaining time to live.
//   - Reconnects back off exponentially, with jitter, between ReconnectMin
//     and ReconnectMax. A sender whose node has no route waits instead
//     until the directory changes or Rehop is called (at most
//     noRouteWait). The link's state and last error are always visible
//     in Status.
//   - tcp:// connectors dial plain TCP, tls:// ones TLS with Config.TLS; the
//     server's certificate is verified for the connector's host (or its
//     server_name option), and a failure is the link's last error.
//
// sender imports message, address, queue and session; never receiver, the
// root package or conf.
package sender
