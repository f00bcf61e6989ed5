package petrel

import (
	"sync"
	"sync/atomic"

	"github.com/petrelmq/petrel/address"
)

// Every send to another node asks for its next hop, to refuse at once a
// send to a node with no route (ErrNoRoute), whether or not its send
// queue exists. A node that discovery found is resolved by a walk of the
// directory under its lock, so the answers are kept in a hopTable for as
// long as the routes and the directory stay the same: a send then costs
// three atomic loads and a sync.Map read, and no lock.

// maxHopAnswers bounds the answers one hopTable keeps. Any name may be
// asked (a relayed message names its destination), so past the bound an
// answer is worked out each time instead of kept.
const maxHopAnswers = 4096

// hopTable holds nextHop's answers for one routes table and one
// generation of the directory; a change of either starts a new, empty one.
type hopTable struct {
	routes  *address.Routes
	dirGen  uint64
	answers sync.Map // node name → hopAnswer
	size    atomic.Int32
}

type hopAnswer struct {
	hop string
	ok  bool
}

// nextHop resolves with the routes in force; a node that discovery found,
// and that no route names, is its own hop.
func (n *Node) nextHop(node string) (string, bool) {
	// The generation is read before the directory: a change between the
	// two gives a newer generation, so the answer is not kept past it.
	routes, gen := n.routes.Load(), n.dir.Generation()
	t := n.hops.Load()
	if t == nil || t.routes != routes || t.dirGen != gen {
		fresh := &hopTable{routes: routes, dirGen: gen}
		if n.hops.CompareAndSwap(t, fresh) {
			t = fresh
		} else if t = n.hops.Load(); t == nil || t.routes != routes || t.dirGen != gen {
			// Another send swapped in a table of another state: answer
			// without keeping.
			return n.resolveHop(routes, node)
		}
	}
	if a, ok := t.answers.Load(node); ok {
		a := a.(hopAnswer)
		return a.hop, a.ok
	}
	hop, ok := n.resolveHop(routes, node)
	if t.size.Load() < maxHopAnswers {
		if _, loaded := t.answers.LoadOrStore(node, hopAnswer{hop, ok}); !loaded {
			t.size.Add(1)
		}
	}
	return hop, ok
}

// resolveHop is nextHop's answer with routes, worked out.
func (n *Node) resolveHop(routes *address.Routes, node string) (string, bool) {
	if hop, ok := routes.NextHop(node); ok {
		return hop, true
	}
	if node == n.cfg.Name {
		return "", false
	}
	if _, ok := n.dir.Lookup(node); ok {
		return node, true
	}
	return "", false
}

// sendable reports whether a send to node may be taken: it has a route,
// or it is a node that discovery found and then forgot (an outage: its
// messages wait in its send queue until it is heard again, as for a link
// that is down). A neighbour or route the operator removed has neither.
func (n *Node) sendable(node string) bool {
	if _, ok := n.nextHop(node); ok {
		return true
	}
	return n.dir.Silent(node)
}
