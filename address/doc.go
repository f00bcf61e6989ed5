// Package address holds what a node knows about names: the roles an address
// plays on this node, and (with the links work) routes, connector URIs and the
// node directory.
//
// Invariants: address imports only message and the standard library.
package address
