package console

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/sender"
)

// On a sparse ring of 1 to 12 nodes, every link's label is clear of every
// other label, every circle and every name, and inside the graph, with
// the widest labels (backing off, large figures) and the longest names the
// sparse ring takes: each box as textWidth estimates it at the CSS's 12px
// (TestConsoleNetworkLabelsInBrowser checks the same as Chromium lays the
// page out).
func TestSparseLabelsDoNotOverlap(t *testing.T) {
	s := &Server{sampler: &sampler{series: map[string]*series{}}}
	for n := 1; n <= maxSparse; n++ {
		// The longest names namesFit takes for n nodes.
		chars := int(min(2*math.Pi*130/float64(n)-6, sparseW/2) / charW)
		long := func(i int) string { return (fmt.Sprintf("n%02d-", i) + strings.Repeat("plant", 12))[:chars] }
		// A relayed node's name is followed by " (via " its relay ")": when
		// there is no room for it, the mixed network has none.
		relayChars := (chars - len(" (via )")) / 2
		short := func(i int) string { return long(i)[:relayChars] }
		if relayChars < 3 {
			short = long
		}
		cases := map[string]Snapshot{}
		// Every node a hop, its link backing off: the longest state.
		for _, inFlight := range []int64{0, 12345678} {
			snap := Snapshot{Node: "hub-frankfurt-main"}
			for i := range n {
				snap.Links = append(snap.Links, sender.Status{Queue: "orders@" + long(i), Destination: long(i), NextHop: long(i),
					State: sender.StateBackingOff, InFlight: inFlight})
			}
			cases[fmt.Sprintf("%d backing off, %d in flight", n, inFlight)] = snap
		}
		// Links mixed with nodes of the directory and nodes reached
		// through a relay.
		mixed := Snapshot{Node: "a"}
		for i := range n {
			switch i % 3 {
			case 0:
				mixed.Links = append(mixed.Links, sender.Status{Queue: "orders@" + short(i), Destination: short(i), NextHop: short(i), State: sender.StateConnecting})
			case 1:
				mixed.Nodes = append(mixed.Nodes, Peer{Name: short(i), Source: "discovered"})
			case 2:
				if relayChars < 3 {
					mixed.Nodes = append(mixed.Nodes, Peer{Name: short(i)})
					continue
				}
				mixed.Links = append(mixed.Links, sender.Status{Queue: "orders@" + short(i), Destination: short(i), NextHop: short(i - 2), State: sender.StateConnected, InFlight: 42})
			}
		}
		cases[fmt.Sprintf("%d mixed", n)] = mixed
		// Three neighbours of one-letter names, their links backing off.
		if n == 3 {
			snap := Snapshot{Node: "a"}
			for _, nb := range []string{"b", "c", "d"} {
				snap.Links = append(snap.Links, sender.Status{Queue: "x@" + nb, Destination: nb, NextHop: nb, State: sender.StateBackingOff})
			}
			cases["b, c, d backing off"] = snap
		}
		for what, snap := range cases {
			v := s.networkView(snap, "")
			if v.Dense {
				t.Errorf("%s: drawn dense", what)
				continue
			}
			checkDrawing(t, v)
			checkLabels(t, what, v)
		}
	}
}

// checkLabels checks that the labels of v's links, as textBox estimates
// them, overlap no other label, circle or name, and are inside the graph.
func checkLabels(t *testing.T, what string, v networkLive) {
	t.Helper()
	type named struct {
		what string
		b    box
	}
	var labels, names []named
	for _, h := range v.Hops {
		if len(h.Label) != 2 {
			t.Errorf("%s: the link to %s is labelled %q", what, h.Name, h.Label)
			continue
		}
		labels = append(labels, named{"the label of the link to " + h.Name, textBox(h.LX, h.LY, "middle", h.Label...)})
	}
	for _, n := range v.Nodes {
		names = append(names, named{n.Name + "'s name", nameBox(n)})
	}
	for i, a := range labels {
		if a.b.x0 < 0 || a.b.y0 < 0 || a.b.x1 > float64(v.Width) || a.b.y1 > float64(v.Height) {
			t.Errorf("%s: %s %+v is outside the %dx%d graph", what, a.what, a.b, v.Width, v.Height)
		}
		for _, b := range append(labels[i+1:], names...) {
			if a.b.overlaps(b.b) {
				t.Errorf("%s: %s %+v overlaps %s %+v", what, a.what, a.b, b.what, b.b)
			}
		}
		for _, n := range v.Nodes {
			if a.b.hitsCircle(n.X, n.Y, n.R) {
				t.Errorf("%s: %s %+v overlaps %s's circle", what, a.what, a.b, n.Name)
			}
		}
	}
	for i, a := range names {
		if a.b.x0 < 0 || a.b.y0 < 0 || a.b.x1 > float64(v.Width) || a.b.y1 > float64(v.Height) {
			t.Errorf("%s: %s %+v is outside the %dx%d graph", what, a.what, a.b, v.Width, v.Height)
		}
		for _, b := range names[i+1:] {
			if a.b.overlaps(b.b) {
				t.Errorf("%s: %s overlaps %s", what, a.what, b.what)
			}
		}
	}
}

// The boxes' arithmetic, and the width of the labels' words.
func TestTextBoxes(t *testing.T) {
	a := textBox(100, 50, "middle", "ab")
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if w := a.x1 - a.x0; !near(w, 2*0.66*fontPx) || !near(a.x0, 100-w/2) || !near(a.y0, 50-ascent) || !near(a.y1, 50+descent) {
		t.Fatalf("box of ab: %+v", a)
	}
	if b := textBox(100, 50, "middle", "ab", "abcd"); !near(b.y1, 50+lineH+descent) || !near(b.x1-b.x0, 4*0.66*fontPx) {
		t.Fatalf("box of two lines: %+v", b)
	}
	if !a.overlaps(textBox(100, 60, "start", "x")) || a.overlaps(textBox(200, 50, "start", "x")) {
		t.Fatal("overlaps")
	}
	if !a.hitsCircle(100, 70, 18) || a.hitsCircle(100, 80, 18) {
		t.Fatal("hitsCircle")
	}
	// DejaVu Sans, as wide as common sans-serifs get, draws "↻ down
	// (backing off)" 124 px wide at 12px.
	if w := textWidth("↻ down (backing off)"); w < 124 {
		t.Fatalf("the longest state is estimated %.0f px wide", w)
	}
}
