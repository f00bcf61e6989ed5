package console

import (
	"math"
	"sort"
	"unicode/utf8"
)

// The network graph's layout. This node is in the centre, the nodes it
// draws on a ring around it, the links as spokes:
//
//   - Up to maxSparse nodes whose names fit (namesFit), the ring is
//     sparse: names above or below the nodes, each link's state,
//     in-flight count and rate written on its spoke, and the nodes
//     reached through a relay outside the ring, by their relay.
//   - Else the ring is dense, up to maxDense nodes: smaller circles,
//     names along the radii (so that they never overlap, however many),
//     a link's state as its symbol before the name, the relayed nodes on
//     the ring too. The viewBox grows to hold the names.
//   - Past maxDense, the ring has the nodes whose links need a look first
//     (pickRing), a note in the corner says how many more there are, and
//     they are listed under the graph.

const (
	maxSparse = 12
	maxDense  = 36
	// maxListed bounds the nodes listed as not drawn.
	maxListed = 200
	// maxLabel bounds a name on a dense ring, in characters; the whole
	// name is in the node's title and the tables.
	maxLabel = 18

	sparseW, sparseH = 720, 420
	nodeR, denseR    = 18.0, 11.0
	// charW is about how wide a character of the 12px labels is.
	charW = 7.0
)

// layout places the nodes: this one, order's hops and the directory's
// other nodes (kind), and the nodes reached through relays (relayed: node
// → its next hop).
func (v *networkLive) layout(self string, order []string, hops map[string]*hopView, kind, relayed map[string]string) {
	var others, far []string
	for name := range kind {
		if hops[name] == nil {
			if _, ok := relayed[name]; !ok {
				others = append(others, name)
			}
		}
	}
	for name := range relayed {
		if hops[name] == nil {
			far = append(far, name)
		}
	}
	sort.Strings(others)
	sort.Strings(far)
	near := append(append([]string(nil), order...), others...)
	if len(near)+len(far) <= maxSparse && namesFit(append(near, far...), relayed, hops) {
		// A relayed node is drawn beside its relay, or on the ring when
		// its relay is not drawn.
		drawn := map[string]bool{}
		for _, name := range near {
			drawn[name] = true
		}
		var beside []string
		for _, name := range far {
			if drawn[relayed[name]] {
				beside = append(beside, name)
			} else {
				near = append(near, name)
			}
		}
		v.sparse(self, near, beside, hops, kind, relayed)
		return
	}
	ring, rest := pickRing(append(near, far...), maxDense, hops, kind)
	v.dense(self, ring, hops, kind, relayed)
	if len(rest) > 0 {
		// In the corner, off the ring: how many more, pointing at their
		// list.
		v.Hidden = len(rest)
		v.More = &graphNode{Kind: "more", Label: "+" + itoa(int64(len(rest))) + " more nodes, listed below",
			X: float64(v.Width) - 12, Y: float64(v.Height) - 14}
		v.NotDrawn = notDrawn(rest, hops, kind, relayed)
	}
}

// namesFit reports whether the names of nodes, written level under or
// over their nodes on a sparse ring, are narrower than the room between
// two nodes: else the ring is drawn dense, names along the radii.
func namesFit(nodes []string, relayed map[string]string, hops map[string]*hopView) bool {
	room := 2*math.Pi*130/float64(max(len(nodes), 1)) - 6
	for _, name := range nodes {
		n := utf8.RuneCountInString(name)
		if via, ok := relayed[name]; ok && hops[name] == nil {
			n += len(" (via )") + utf8.RuneCountInString(via)
		}
		if charW*float64(n) > min(room, sparseW/2) {
			return false
		}
	}
	return true
}

// sparse lays a few nodes out: near on the ring, far outside it.
func (v *networkLive) sparse(self string, near, far []string, hops map[string]*hopView, kind, relayed map[string]string) {
	v.Width, v.Height = sparseW, sparseH
	cx, cy := float64(v.Width)/2, float64(v.Height)/2
	v.Nodes = append(v.Nodes, graphNode{Name: self, Kind: "self", Label: self + " (this node)", X: cx, Y: cy, R: 26, LabelDY: 42})
	pos := map[string][2]float64{}
	for i, name := range near {
		a := ringAngle(i, len(near))
		x, y := cx+130*math.Cos(a), cy+130*math.Sin(a)
		pos[name] = [2]float64{x, y}
		n := graphNode{Name: name, Kind: kindOf(name, kind), Label: name, X: x, Y: y, R: nodeR, LabelDY: labelDY(y, cy)}
		if via, ok := relayed[name]; ok && hops[name] == nil {
			n.Kind, n.Label = "relayed", name+" (via "+via+")"
		}
		v.Nodes = append(v.Nodes, n)
		if h := hops[name]; h != nil {
			h.X1, h.Y1, h.X2, h.Y2 = cx, cy, x, y
			h.LX, h.LY = (cx+x)/2, (cy+y)/2-6
		}
	}
	for i, name := range far {
		via := pos[relayed[name]]
		a := math.Atan2(via[1]-cy, via[0]-cx) + float64(i%3-1)*0.35
		x, y := cx+195*math.Cos(a), cy+195*math.Sin(a)
		v.Nodes = append(v.Nodes, graphNode{Name: name, Kind: "relayed", Label: name + " (via " + relayed[name] + ")", X: x, Y: y, R: nodeR, LabelDY: labelDY(y, cy)})
		v.Routes = append(v.Routes, graphEdge{via[0], via[1], x, y})
	}
}

// dense lays ring out with the names along the radii.
func (v *networkLive) dense(self string, ring []string, hops map[string]*hopView, kind, relayed map[string]string) {
	v.Dense = true
	// The ring is wide enough that the circles keep 8px apart, and the
	// viewBox holds the longest name past it.
	r := max(140, float64(len(ring))*(2*denseR+8)/(2*math.Pi))
	longest := 0
	labels := make([]string, len(ring))
	for i, name := range ring {
		labels[i] = denseLabel(name, hops[name], relayed)
		longest = max(longest, utf8.RuneCountInString(labels[i]))
	}
	half := r + denseR + 6 + charW*float64(longest) + 8
	v.Width, v.Height = int(math.Ceil(2*half)), int(math.Ceil(2*half))+24 // the note below
	cx, cy := half, half
	v.Nodes = append(v.Nodes, graphNode{Name: self, Kind: "self", Label: self + " (this node)", X: cx, Y: cy, R: 26, LabelDY: 42})
	for i, name := range ring {
		a := ringAngle(i, len(ring))
		x, y := cx+r*math.Cos(a), cy+r*math.Sin(a)
		n := graphNode{Name: name, Kind: kindOf(name, kind), Label: labels[i], X: x, Y: y, R: denseR, Radial: true,
			LX: cx + (r+denseR+6)*math.Cos(a), LY: cy + (r+denseR+6)*math.Sin(a), Rotate: a * 180 / math.Pi, Anchor: "start"}
		if _, ok := relayed[name]; ok && hops[name] == nil {
			n.Kind = "relayed"
		}
		if math.Cos(a) < -1e-9 {
			// The left half reads left to right too.
			n.Rotate, n.Anchor = n.Rotate+180, "end"
		}
		v.Nodes = append(v.Nodes, n)
		if h := hops[name]; h != nil {
			h.X1, h.Y1, h.X2, h.Y2 = cx, cy, x, y
		}
	}
}

// denseLabel is a node's name on a dense ring: its link's state symbol
// first, its relay after, cut at maxLabel characters.
func denseLabel(name string, h *hopView, relayed map[string]string) string {
	label := name
	if via, ok := relayed[name]; ok && h == nil {
		label += " via " + via
	}
	if utf8.RuneCountInString(label) > maxLabel {
		label = string([]rune(label)[:maxLabel-1]) + "…"
	}
	if h != nil {
		label = h.St.Symbol + " " + label
	}
	return label
}

func kindOf(name string, kind map[string]string) string {
	if k := kind[name]; k != "" {
		return k
	}
	return "neighbour"
}

// ringAngle is the angle of the i-th of n places on a ring, the first at
// the top.
func ringAngle(i, n int) float64 {
	return 2*math.Pi*float64(i)/float64(max(n, 1)) - math.Pi/2
}

func labelDY(y, cy float64) float64 {
	if y < cy-1 {
		return -26
	}
	return 34
}

// pickRing chooses the nodes of all drawn on the ring, at most limit: all
// of them when they fit; else those first in the order of need: hops
// whose links are not up (the worst first), hops with messages in
// flight, the other hops, the directory's neighbours and the relayed
// nodes, the discovered nodes. The chosen are drawn by name, so that a
// node keeps its place while the others change. rest are the nodes left
// out, in that order.
func pickRing(all []string, limit int, hops map[string]*hopView, kind map[string]string) (ring, rest []string) {
	all = append([]string(nil), all...)
	if len(all) > limit {
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
		all, rest = all[:limit], all[limit:]
	}
	sort.Strings(all)
	return all, rest
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
		n := hiddenNode{Name: name, Kind: kindOf(name, kind), Hop: hops[name]}
		if via, ok := relayed[name]; ok && n.Hop == nil {
			n.Kind, n.Via = "relayed", via
		}
		out = append(out, n)
	}
	return out
}
