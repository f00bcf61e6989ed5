package address

import "sort"

// Routes answers "which neighbour carries traffic for node X". A neighbour
// is a node this node reaches directly, and is its own next hop; any other
// node is reached through the neighbour its route names.
//
// Routes is immutable after NewRoutes, so it is safe for concurrent use. A
// configuration change builds a new one and swaps it in whole, so a lookup
// never sees half of an edit. A nil *Routes knows no node.
type Routes struct {
	self       string
	neighbours map[string]bool
	via        map[string]string // destination → neighbour; never a neighbour or self as key
	known      []string          // sorted
}

// NewRoutes builds the table of node self. via maps a destination node to
// the neighbour that carries its traffic.
//
// NewRoutes trusts that its input was checked (petrel.Config.Validate
// refuses these), and keeps NextHop's promise that it only ever answers a
// neighbour by dropping what breaks it: an empty name, self as a neighbour
// or a destination, a route through a node that is not a neighbour, and a
// route to a neighbour (a neighbour is its own next hop).
func NewRoutes(self string, neighbours []string, via map[string]string) *Routes {
	r := &Routes{
		self:       self,
		neighbours: make(map[string]bool, len(neighbours)),
		via:        make(map[string]string, len(via)),
	}
	for _, n := range neighbours {
		if n != "" && n != self && !r.neighbours[n] {
			r.neighbours[n] = true
			r.known = append(r.known, n)
		}
	}
	for node, hop := range via {
		if node != "" && node != self && !r.neighbours[node] && r.neighbours[hop] {
			r.via[node] = hop
			r.known = append(r.known, node)
		}
	}
	sort.Strings(r.known)
	return r
}

// NextHop returns the neighbour to hand traffic for node to: node itself
// when it is a neighbour, the neighbour its route names otherwise. ok is
// false for this node itself (its traffic stays here) and for a node with
// no route.
func (r *Routes) NextHop(node string) (hop string, ok bool) {
	if r == nil || node == r.self {
		return "", false
	}
	if r.neighbours[node] {
		return node, true
	}
	hop, ok = r.via[node]
	return hop, ok
}

// Known returns every node this node can reach, neighbours and routed
// nodes, sorted by name, in a slice the caller may keep.
func (r *Routes) Known() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.known...)
}
