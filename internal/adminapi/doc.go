// Package adminapi is the wire of a node's admin HTTP API: its paths, the
// JSON bodies of its requests and answers, and the one client that calls
// it (Client), for `petrel` and the tests. The node serves it (package
// petrel, admin*.go); an embedder calls the node's methods instead, so
// none of this is part of the embedding API.
//
// Invariants:
//   - It is a leaf beside the root: it imports filetransfer for the file
//     states, and must not import the root package, which imports it. The
//     status (petrel.Status) and the queue figures (petrel.QueueStats) are
//     the root's own types: a caller that may import both decodes into them.
//   - The bodies are the API's contract with clients of other versions:
//     their JSON names do not change.
//   - Every request the client sends has Content-Type application/json and,
//     over TCP, the bearer token when it has one, so that it passes the
//     node's guard of the admin listener (Host, Origin, token, JSON).
package adminapi
