package console

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The network graph's layout. This node is in the centre, the nodes it
// draws on a ring around it, the links as spokes:
//
//   - Up to maxSparse nodes whose names fit (namesFit), the ring is
//     sparse: names above or below the nodes, each link's state,
//     in-flight count and rate written level on its spoke, and the nodes
//     reached through a relay outside the ring, by their relay. A label
//     is wider than the room between two spokes near this node, so the
//     ring is made as large as it takes for no label to overlap another,
//     a circle or a name (sparse): the labels' boxes are computed here,
//     their width overestimated rune by rune (textWidth). If even
//     maxRingR is not enough, the ring is dense.
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

	// A sparse ring's radius: ringR, or larger by ringStep until every
	// label has room, up to maxRingR. The nodes reached through a relay
	// are farOut further out; margin is kept round the drawing.
	ringR, ringStep, maxRingR = 130.0, 10.0, 400.0
	farOut                    = 65.0
	margin                    = 6.0
)

// spokePlaces are where a link's label may go along its spoke, as a
// fraction of the way from this node to the other: the middle first.
var spokePlaces = []float64{0.5, 0.58, 0.42, 0.66, 0.34, 0.74, 0.26}

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
		onRing := append([]string(nil), near...)
		var beside []string
		for _, name := range far {
			if drawn[relayed[name]] {
				beside = append(beside, name)
			} else {
				onRing = append(onRing, name)
			}
		}
		if v.sparse(self, onRing, beside, hops, kind, relayed) {
			return
		}
		// No ring up to maxRingR has room for every label: dense, the
		// figures in the tables.
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

// sparse lays a few nodes out: near on the ring, far outside it. The
// ring is the smallest, from ringR up, on which no text overlaps another
// text or a circle (sparseAt); it reports false, for a dense ring, when
// even the largest has no room.
func (v *networkLive) sparse(self string, near, far []string, hops map[string]*hopView, kind, relayed map[string]string) bool {
	for r := ringR; r <= maxRingR; r += ringStep {
		w := *v
		if w.sparseAt(r, self, near, far, hops, kind, relayed) {
			*v = w
			return true
		}
	}
	return false
}

// sparseAt lays the nodes out on a ring of radius r, centred on this
// node: the nodes' circles and names first, then each link's label on its
// spoke, at the first place along it (the middle first) where its box is
// clear of every circle, name and label already placed. It reports false
// if two names overlap, or a label has no such place. The viewBox is then
// made to hold everything, at least sparseW by sparseH.
func (v *networkLive) sparseAt(r float64, self string, near, far []string, hops map[string]*hopView, kind, relayed map[string]string) bool {
	var boxes []box
	var circles [][3]float64
	// add draws n, its name at the first of its places (namePlaces) clear
	// of the circles and names already drawn; false if there is none.
	add := func(n graphNode) bool {
		for _, c := range circles {
			if math.Hypot(n.X-c[0], n.Y-c[1]) < n.R+c[2]+gap {
				return false
			}
		}
		for _, b := range boxes {
			if b.hitsCircle(n.X, n.Y, n.R) {
				return false
			}
		}
	places:
		for _, p := range namePlaces(n) {
			n.LabelDX, n.LabelDY, n.Anchor = p.dx, p.dy, p.anchor
			nb := nameBox(n)
			for _, b := range boxes {
				if nb.overlaps(b) {
					continue places
				}
			}
			for _, c := range circles {
				if nb.hitsCircle(c[0], c[1], c[2]) {
					continue places
				}
			}
			v.Nodes = append(v.Nodes, n)
			boxes = append(boxes, nb)
			circles = append(circles, [3]float64{n.X, n.Y, n.R})
			return true
		}
		return false
	}
	if !add(graphNode{Name: self, Kind: "self", Label: self + " (this node)", R: 26, LabelDY: 42}) {
		return false
	}
	pos := map[string][2]float64{}
	for i, name := range near {
		a := ringAngle(i, len(near))
		x, y := r*math.Cos(a), r*math.Sin(a)
		pos[name] = [2]float64{x, y}
		n := graphNode{Name: name, Kind: kindOf(name, kind), Label: name, X: x, Y: y, R: nodeR, LabelDY: labelDY(y)}
		if via, ok := relayed[name]; ok && hops[name] == nil {
			n.Kind, n.Label = "relayed", name+" (via "+via+")"
		}
		if !add(n) {
			return false
		}
	}
	for i, name := range far {
		via := pos[relayed[name]]
		a := math.Atan2(via[1], via[0]) + float64(i%3-1)*0.35
		x, y := (r+farOut)*math.Cos(a), (r+farOut)*math.Sin(a)
		if !add(graphNode{Name: name, Kind: "relayed", Label: name + " (via " + relayed[name] + ")", X: x, Y: y, R: nodeR, LabelDY: labelDY(y)}) {
			return false
		}
		v.Routes = append(v.Routes, graphEdge{via[0], via[1], x, y})
	}
	for _, name := range near {
		h := hops[name]
		if h == nil {
			continue
		}
		x, y := pos[name][0], pos[name][1]
		h.X1, h.Y1, h.X2, h.Y2 = 0, 0, x, y
		h.Label = edgeLabel(h)
		placed := false
		for _, t := range spokePlaces {
			lb := edgeBox(t*x, t*y, h)
			clear := true
			for _, b := range boxes {
				clear = clear && !lb.overlaps(b)
			}
			for _, c := range circles {
				clear = clear && !lb.hitsCircle(c[0], c[1], c[2])
			}
			if clear {
				h.LX, h.LY = t*x, edgeBaseline(t*y)
				boxes = append(boxes, lb)
				placed = true
				break
			}
		}
		if !placed {
			return false
		}
	}
	// The viewBox: everything drawn, and a margin, this node in the
	// middle.
	halfW, halfH := float64(sparseW)/2, float64(sparseH)/2
	for _, b := range boxes {
		halfW = max(halfW, -b.x0+margin, b.x1+margin)
		halfH = max(halfH, -b.y0+margin, b.y1+margin)
	}
	for _, c := range circles {
		halfW = max(halfW, math.Abs(c[0])+c[2]+margin)
		halfH = max(halfH, math.Abs(c[1])+c[2]+margin)
	}
	halfW, halfH = math.Ceil(halfW), math.Ceil(halfH)
	v.Width, v.Height = int(2*halfW), int(2*halfH)
	for i := range v.Nodes {
		v.Nodes[i].X += halfW
		v.Nodes[i].Y += halfH
	}
	for i := range v.Routes {
		e := &v.Routes[i]
		e.X1, e.Y1, e.X2, e.Y2 = e.X1+halfW, e.Y1+halfH, e.X2+halfW, e.Y2+halfH
	}
	for _, name := range near {
		if h := hops[name]; h != nil {
			h.X1, h.Y1, h.X2, h.Y2 = h.X1+halfW, h.Y1+halfH, h.X2+halfW, h.Y2+halfH
			h.LX, h.LY = h.LX+halfW, h.LY+halfH
		}
	}
	return true
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

// namePlace is where a node's name goes: (dx, dy) from its centre,
// anchored at anchor.
type namePlace struct {
	dx, dy float64
	anchor string
}

// namePlaces are where n's name may go on a sparse ring, the first
// clear one taken: LabelDY's side, then the other side, then level with
// the circle on its outer side (the names of a node reached through a
// relay and of its relay may be side by side).
func namePlaces(n graphNode) []namePlace {
	out := []namePlace{{0, n.LabelDY, "middle"}}
	if n.Kind == "self" {
		return out
	}
	other := -26.0 // above
	if n.LabelDY < 0 {
		other = 34 // below
	}
	out = append(out, namePlace{0, other, "middle"})
	if n.X < 0 {
		return append(out, namePlace{-(n.R + 6), 4, "end"})
	}
	return append(out, namePlace{n.R + 6, 4, "start"})
}

// nameBox is the box of n's name on a sparse ring.
func nameBox(n graphNode) box {
	anchor := n.Anchor
	if anchor == "" {
		anchor = "middle"
	}
	return textBox(n.X+n.LabelDX, n.Y+n.LabelDY, anchor, n.Label)
}

// labelDY places the name of a node at height y, this node at 0: above a
// node of the upper half, below the others.
func labelDY(y float64) float64 {
	if y < -1 {
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

// Text boxes. The graph's text is 12px (console.css: .net .edge text,
// .net .node text); textWidth overestimates a line's width there, rune by
// rune, so that the boxes computed here hold the text however a browser's
// sans-serif draws it: wide letters and symbols 1em, capitals 0.8em,
// narrow letters and punctuation 0.42em, the others 0.66em (DejaVu Sans,
// among the widest, has 0.64em digits and lower case letters). A line's
// box reaches from ascent above its baseline to descent below; lines are
// lineH apart.
const (
	fontPx  = 12.0
	ascent  = 1.1 * fontPx
	descent = 0.3 * fontPx
	lineH   = 1.25 * fontPx
	// gap is the least room between two boxes, or a box and a circle.
	gap = 2.0
)

func runeEm(r rune) float64 {
	switch {
	case r >= 0x1f000: // emoji
		return 1.3
	case r >= 0x1100 || strings.ContainsRune("mwMW@%#&~", r): // CJK, arrows, shapes
		return 1
	case strings.ContainsRune("iljtfrI.,:;'!|()[]{}· ", r):
		return 0.42
	case unicode.IsUpper(r):
		return 0.8
	}
	return 0.66
}

func textWidth(s string) float64 {
	w := 0.0
	for _, r := range s {
		w += runeEm(r) * fontPx
	}
	return w
}

// box is a rectangle of the graph, x0 < x1, y0 < y1 (y down).
type box struct{ x0, y0, x1, y1 float64 }

// textBox is the box of lines of text whose first baseline is at y,
// anchored at x as text-anchor says.
func textBox(x, y float64, anchor string, lines ...string) box {
	w := 0.0
	for _, l := range lines {
		w = max(w, textWidth(l))
	}
	x0 := x - w/2
	switch anchor {
	case "start":
		x0 = x
	case "end":
		x0 = x - w
	}
	return box{x0, y - ascent, x0 + w, y + lineH*float64(len(lines)-1) + descent}
}

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1+gap && b.x0 < a.x1+gap && a.y0 < b.y1+gap && b.y0 < a.y1+gap
}

// hitsCircle reports whether a comes within gap of the circle at (x, y)
// of radius r.
func (a box) hitsCircle(x, y, r float64) bool {
	dx := x - max(a.x0, min(x, a.x1))
	dy := y - max(a.y0, min(y, a.y1))
	return math.Hypot(dx, dy) < r+gap
}

// edgeLabel is a link's label on a sparse ring, on two lines so that it
// is narrow: its state, then its in-flight count and acks per second.
func edgeLabel(h *hopView) []string {
	st, counts := edgeText(h)
	return []string{st, counts}
}

func edgeText(h *hopView) (state, counts string) {
	return h.St.Symbol + " " + h.St.Word, strconv.FormatInt(h.InFlight, 10) + " · " + strconv.FormatFloat(h.Rate, 'f', 1, 64) + "/s"
}

// countsRoom is the least room a label keeps for its figures, so that the
// graph does not move as they change by a digit.
const countsRoom = "0000 · 000.0/s"

// edgeBox is the box of h's label centred on (x, y), its figures at
// least as wide as countsRoom.
func edgeBox(x, y float64, h *hopView) box {
	st, counts := edgeText(h)
	sw, cw := textWidth(st), max(textWidth(counts), textWidth(countsRoom))
	w, ht := max(sw, cw), ascent+lineH+descent
	return box{x - w/2, y - ht/2, x + w/2, y + ht/2}
}

// edgeBaseline is the first baseline of a label whose box edgeBox centred
// on y.
func edgeBaseline(y float64) float64 {
	return y - (ascent+lineH+descent)/2 + ascent
}
