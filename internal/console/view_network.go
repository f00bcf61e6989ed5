package console

import (
	"net/url"
	"strings"

	"github.com/petrelmq/petrel/sender"
)

// The network page: this node, its neighbours, the nodes reached through
// them and the discovered ones, drawn as a graph whose edges are the
// links, each with its state as a word and a symbol as well as a colour.

// linkState is how a link shows: a word, a symbol and a CSS class, so that
// colour is never the only signal. rank orders them, worst first, for a
// hop of several links.
type linkState struct {
	Word, Symbol, Class string
	rank                int
}

var (
	stateDown    = linkState{"down", "▼", "down", 0}
	stateBackoff = linkState{"down (backing off)", "↻", "backoff", 1}
	stateStalled = linkState{"stalled", "■", "stalled", 2}
	stateUp      = linkState{"up", "▲", "up", 3}
)

func stateOf(l sender.Status) linkState {
	switch {
	case l.State == sender.StateConnected && l.Stalled:
		return stateStalled
	case l.State == sender.StateConnected:
		return stateUp
	case l.State == sender.StateBackingOff:
		return stateBackoff
	case l.State == sender.StateConnecting:
		return linkState{"down (connecting)", "▼", "down", 0}
	}
	return stateDown
}

// linkView is one link (one send queue) as the pages show it.
type linkView struct {
	sender.Status
	St                linkState
	SendRate, AckRate float64
}

// hopView is the links to one next hop: one edge of the graph.
type hopView struct {
	Name     string
	St       linkState
	InFlight int64
	Rate     float64 // messages acked per second
	Links    []linkView
	Href     string
	// The edge, and where its label goes: its lines (Label), the first's
	// baseline at (LX, LY), centred.
	X1, Y1, X2, Y2, LX, LY float64
	Label                  []string
}

// graphNode is one node drawn.
type graphNode struct {
	Name, Kind, Label string // Kind: self, neighbour, relayed, discovered
	X, Y              float64
	R                 float64 // its circle's radius
	// LabelDX, LabelDY place the name outside the ring: below a node in
	// the lower half, above one in the upper half, else (when that place
	// is taken) on the other side or level with it, anchored at Anchor,
	// clear of the links' labels.
	LabelDX, LabelDY float64
	// Radial, on a dense ring, sets the label along the radius instead,
	// from (LX, LY), turned by Rotate degrees, anchored at Anchor.
	// On a sparse ring LX, LY and Rotate are unused.
	Radial         bool
	LX, LY, Rotate float64
	Anchor         string
}

// graphEdge is a line between two nodes that is not a link of this node:
// a route through a neighbour.
type graphEdge struct{ X1, Y1, X2, Y2 float64 }

type networkLive struct {
	Node     string
	Width    int
	Height   int
	Nodes    []graphNode
	Hops     []hopView
	Routes   []graphEdge
	Selected *hopView
	Peers    []Peer
	Hidden   int // nodes not drawn, past maxDense
	// Dense is a ring past maxSparse nodes: smaller circles, names along
	// the radii, the links' state in the names instead of on the edges.
	Dense bool
	// NotDrawn lists them (the first maxListed), in the order of need;
	// More is the graph's note of how many there are.
	NotDrawn []hiddenNode
	More     *graphNode
}

func (s *Server) networkView(snap Snapshot, selected string) networkLive {
	v := networkLive{Node: snap.Node, Peers: snap.Nodes}
	hops := map[string]*hopView{}
	var order []string
	hop := func(name string) *hopView {
		h := hops[name]
		if h == nil {
			h = &hopView{Name: name, St: stateDown, Href: "/?link=" + url.QueryEscape(name) + "#detail"}
			hops[name] = h
			order = append(order, name)
		}
		return h
	}
	relayed := map[string]string{} // node → the neighbour it is reached through
	for _, l := range snap.Links {
		name := l.NextHop
		if name == "" {
			name = l.Destination // no route to it yet
		}
		h := hop(name)
		lv := linkView{Status: l, St: stateOf(l)}
		lv.SendRate, lv.AckRate = rates(s.sampler.history("l:" + l.Queue))
		if len(h.Links) == 0 || lv.St.rank < h.St.rank {
			h.St = lv.St
		}
		h.Links = append(h.Links, lv)
		h.InFlight += l.InFlight
		h.Rate += lv.AckRate
		// A link's Destination is the node its queue's messages are for.
		if d := l.Destination; d != "" && d != name && d != snap.Node {
			relayed[d] = name
		}
	}
	kind := map[string]string{}
	for _, p := range snap.Nodes {
		if p.Name == snap.Node {
			continue
		}
		if p.Source == "discovered" {
			kind[p.Name] = "discovered"
		} else {
			kind[p.Name] = "neighbour"
		}
	}
	for _, r := range snap.Routes {
		if _, ok := relayed[r.Node]; !ok {
			relayed[r.Node] = r.Via
		}
	}
	v.layout(snap.Node, order, hops, kind, relayed)
	for _, name := range order {
		h := hops[name]
		v.Hops = append(v.Hops, *h)
		if name == selected {
			sel := *h
			v.Selected = &sel
		}
	}
	return v
}

// destNode is the node part of an address "name@node".
func destNode(addr string) string {
	_, node, _ := strings.Cut(addr, "@")
	return node
}
