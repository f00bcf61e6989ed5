// Package audit is an Interceptor that writes one structured log line per
// message published, delivered and acked on a node: what message (id,
// origin, destination), who (the identity, its kind and address) and by
// which path (embedded, client, link). Sampling keeps one line in N.
//
// It imports the module root (petrel) and nothing of the node's
// internals; the root must never import it.
package audit
