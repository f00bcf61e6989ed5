// Package demo is `petrel demo`: a short, self-checking tour of the
// embedding API. Run opens an embedded node in a temporary directory and
// walks through steps (send, expire, consume with Poll, Receive and
// Listen, dead-letter), then starts three nodes on loopback, A -> C
// (relay) -> B, and sends messages and a file across the relay while it
// cuts the A-C link.
//
// Invariants:
//   - Every claim the demo prints is checked; the first that does not hold
//     ends the demo with an error saying what was seen instead.
//   - Every wait is bounded (demoTimeout), so a regression fails with a
//     reason instead of hanging.
//   - Steps run in order and share one state; the nodes are closed, newest
//     first, before their data directory is removed, whatever happened.
//
// demo uses only the root package's embedding API, and message, address
// and queue for their types; it starts no process. The CLI command and its
// help live in cmd/petrel.
package demo
