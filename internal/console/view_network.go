package console

import (
	"math"
	"net/url"
	"sort"
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
	// The edge, and where its label goes.
	X1, Y1, X2, Y2, LX, LY float64
}

// graphNode is one node drawn.
type graphNode struct {
	Name, Kind, Label string // Kind: self, neighbour, relayed, discovered
	X, Y              float64
	// LabelDY places the name outside the ring: below a node in the lower
	// half, above one in the upper half, clear of the link's label.
	LabelDY float64
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
	Hidden   int // nodes not drawn, past maxDrawn
	// NotDrawn lists them (the first maxListed), in the order of need;
	// More is the graph's note of how many there are.
	NotDrawn []hiddenNode
	More     *graphNode
}

const (
	graphW, graphH = 720, 420
	// maxDrawn bounds the nodes drawn besides this one: past it, the ring
	// shows the hops whose links need a look first, a note in the corner
	// says how many more there are, and they are listed under the graph.
	maxDrawn = 24
	// maxListed bounds the nodes listed as not drawn.
	maxListed = 500
)

// ringRadius is the radius of a ring of n nodes: wide enough past 20
// that their circles (radius 18) do not touch, and within the graph with
// their labels.
func ringRadius(n int) float64 {
	if n > 20 {
		return 150
	}
	return 130
}

// ringAt is where the i-th of n places is on a ring of radius r around
// the graph's centre, the first at the top.
func ringAt(i, n int, r float64) (float64, float64) {
	a := 2*math.Pi*float64(i)/float64(max(n, 1)) - math.Pi/2
	return float64(graphW)/2 + r*math.Cos(a), float64(graphH)/2 + r*math.Sin(a)
}

// pickRing chooses the nodes drawn on the ring, at most maxDrawn: all of
// them, hops first, when they fit; else those first in the order of need: hops whose links are not up
// (the worst first), hops with messages in flight, the other hops,
// the directory's neighbours, the discovered nodes. The chosen are drawn
// by name, so that a node keeps its place while the others change. rest
// are the nodes left out, in that order.
func pickRing(order []string, hops map[string]*hopView, kind, relayed map[string]string) (ring, rest []string) {
	all := append([]string(nil), order...)
	var others []string
	for name := range kind {
		if hops[name] == nil {
			if _, far := relayed[name]; !far {
				others = append(others, name)
			}
		}
	}
	sort.Strings(others)
	all = append(all, others...)
	if len(all) <= maxDrawn {
		return all, nil
	}
	need := func(name string) int {
		h := hops[name]
		switch {
		case h != nil && h.St.rank < stateUp.rank:
			return h.St.rank // 0..2: down, backing off, stalled
		case h != nil && h.InFlight > 0:
			return 3
		case h != nil:
			return 4
		case kind[name] == "discovered":
			return 6
		}
		return 5
	}
	sort.SliceStable(all, func(i, j int) bool {
		ni, nj := need(all[i]), need(all[j])
		if ni != nj {
			return ni < nj
		}
		return all[i] < all[j]
	})
	ring, rest = all[:maxDrawn], all[maxDrawn:]
	sort.Strings(ring)
	return ring, rest
}

// hiddenNode is a node the graph has no room for, as the list under it
// shows it.
type hiddenNode struct {
	Name, Kind, Via string
	Hop             *hopView // nil for a node with no link of this node
}

func notDrawn(rest []string, hops map[string]*hopView, kind, relayed map[string]string) []hiddenNode {
	out := make([]hiddenNode, 0, min(len(rest), maxListed))
	for _, name := range rest[:min(len(rest), maxListed)] {
		n := hiddenNode{Name: name, Kind: kind[name], Hop: hops[name]}
		if via, ok := relayed[name]; ok && n.Hop == nil {
			n.Kind, n.Via = "relayed", via
		}
		if n.Kind == "" {
			n.Kind = "neighbour"
		}
		out = append(out, n)
	}
	return out
}

func (s *Server) networkView(snap Snapshot, selected string) networkLive {
	v := networkLive{Node: snap.Node, Width: graphW, Height: graphH, Peers: snap.Nodes}
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
			name = destNode(l.Destination)
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
		if d := destNode(l.Destination); d != "" && d != name && d != snap.Node {
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
	ring, rest := pickRing(order, hops, kind, relayed)
	cx, cy := float64(graphW)/2, float64(graphH)/2
	v.Nodes = append(v.Nodes, graphNode{Name: snap.Node, Kind: "self", Label: snap.Node + " (this node)", X: cx, Y: cy, LabelDY: 42})
	pos := map[string][2]float64{}
	for i, name := range ring {
		x, y := ringAt(i, len(ring), ringRadius(len(ring)))
		pos[name] = [2]float64{x, y}
		k := kind[name]
		if k == "" {
			k = "neighbour"
		}
		v.Nodes = append(v.Nodes, graphNode{Name: name, Kind: k, Label: name, X: x, Y: y, LabelDY: labelDY(y, cy)})
		if h := hops[name]; h != nil {
			h.X1, h.Y1, h.X2, h.Y2 = cx, cy, x, y
			h.LX, h.LY = (cx+x)/2, (cy+y)/2-6
		}
	}
	far := make([]string, 0, len(relayed))
	for name := range relayed {
		far = append(far, name)
	}
	sort.Strings(far)
	for i, name := range far {
		via, ok := pos[relayed[name]]
		if !ok || len(v.Nodes) >= maxDrawn+1 {
			rest = append(rest, name)
			continue
		}
		a := math.Atan2(via[1]-cy, via[0]-cx) + float64(i%3-1)*0.35
		x, y := cx+195*math.Cos(a), cy+195*math.Sin(a)
		v.Nodes = append(v.Nodes, graphNode{Name: name, Kind: "relayed", Label: name + " (via " + relayed[name] + ")", X: x, Y: y, LabelDY: labelDY(y, cy)})
		v.Routes = append(v.Routes, graphEdge{via[0], via[1], x, y})
	}
	if len(rest) > 0 {
		// In the corner, off the ring: how many more, pointing at their list.
		v.Hidden = len(rest)
		v.More = &graphNode{Kind: "more", Label: "+" + itoa(int64(len(rest))) + " more nodes, listed below",
			X: graphW - 12, Y: graphH - 14}
		v.NotDrawn = notDrawn(rest, hops, kind, relayed)
	}
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

func labelDY(y, cy float64) float64 {
	if y < cy-1 {
		return -26
	}
	return 34
}
