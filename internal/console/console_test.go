package console

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/sender"
)

// The console is driven end to end by the root package's tests (over
// HTTP, on a real node) and by cmd/petrel's browser test; these check its
// arithmetic and the goroutines of its own package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var pts []point
	for i := range 10 {
		pts = append(pts, point{at: t0.Add(time.Duration(i) * 2 * time.Second), a: int64(10 * i), b: int64(5 * i)})
	}
	a, b := rates(pts)
	if a != 5 || b != 2.5 {
		t.Fatalf("rates %v, %v; want 5 and 2.5 a second", a, b)
	}
	if a, b := rates(pts[:1]); a != 0 || b != 0 {
		t.Fatalf("one sample gave rates %v, %v", a, b)
	}
}

func TestSparkline(t *testing.T) {
	pts := []point{{depth: 0}, {depth: 10}, {depth: 5}}
	line, lo, hi := sparkline(pts)
	if lo != 0 || hi != 10 || line != "0.0,22.0 60.0,2.0 120.0,12.0" {
		t.Fatalf("sparkline %q %d..%d", line, lo, hi)
	}
	if line, _, _ := sparkline(nil); line != "" {
		t.Fatalf("no samples drew %q", line)
	}
}

// Every state reads as a word and a symbol, not a colour alone.
func TestLinkStatesHaveWords(t *testing.T) {
	for _, l := range []sender.Status{
		{State: sender.StateConnected}, {State: sender.StateConnected, Stalled: true},
		{State: sender.StateBackingOff}, {State: sender.StateConnecting}, {State: sender.StateStopped},
	} {
		st := stateOf(l)
		if st.Word == "" || st.Symbol == "" || st.Class == "" {
			t.Errorf("%+v shows as %+v", l, st)
		}
	}
	if w := stateOf(sender.Status{State: sender.StateBackingOff}).Word; !strings.Contains(w, "down") || !strings.Contains(w, "backing off") {
		t.Errorf("backing off reads %q", w)
	}
}

func TestConsolePaths(t *testing.T) {
	for _, p := range []string{"/", "/login", "/queues", "/queues/orders", "/static/console.js", "/events", "/node", "/transfers"} {
		if !IsConsolePath(p) {
			t.Errorf("%s is not a console path", p)
		}
	}
	for _, p := range []string{"/api/queues", "/api/send", "/metrics", "/status", "/healthz", "/queuesx"} {
		if IsConsolePath(p) {
			t.Errorf("%s is a console path: the admin guard would not ask its token", p)
		}
	}
}

func TestTemplatesParse(t *testing.T) {
	if _, err := parsePages(); err != nil {
		t.Fatal(err)
	}
}

func TestRateLines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pts := []point{{at: t0}, {at: t0.Add(2 * time.Second), a: 20, b: 0}, {at: t0.Add(4 * time.Second), a: 20, b: 10}}
	enq, ack, top := rateLines(pts)
	if top != 10 || enq != "0.0,2.0 120.0,22.0" || ack != "0.0,22.0 120.0,12.0" {
		t.Fatalf("rate lines %q %q up to %v", enq, ack, top)
	}
}

func TestQueueLabels(t *testing.T) {
	relays := map[string]bool{"files": true}
	for _, c := range []struct {
		q    queue.Stats
		want string
	}{
		{queue.Stats{Name: "orders", Kind: queue.KindReceive}, "receive"},
		{queue.Stats{Name: "orders@b", Kind: queue.KindSend}, "send"},
		{queue.Stats{Name: "files@b", Kind: queue.KindSend}, "relay"},
		{queue.Stats{Name: "files", Kind: queue.KindReceive}, "receive"},
		{queue.Stats{Name: "orders.dlq", Kind: queue.KindReceive}, "dead letters"},
		{queue.Stats{Name: "sub:audit", Kind: queue.KindReceive}, "subscription"},
		{queue.Stats{Name: "billing-dead", Kind: queue.KindReceive}, "dead letters"},
	} {
		if got := queueLabel(c.q, relays, map[string]string{"billing-dead": "billing"}); got != c.want {
			t.Errorf("%s (%v) reads %q, want %q", c.q.Name, c.q.Kind, got, c.want)
		}
	}
	if got := toward("files@b", "c"); got != "b via c" {
		t.Errorf("toward through a relay: %q", got)
	}
	if got := toward("files@b", "b"); got != "b" {
		t.Errorf("toward a neighbour: %q", got)
	}
}

// A network larger than the graph: the links that need a look are drawn
// first, on a dense ring whose names run along the radii; the others are
// listed; nothing drawn overlaps or leaves the graph.
func TestLargeNetworkDrawsWorstFirstAndListsTheRest(t *testing.T) {
	s := &Server{sampler: &sampler{series: map[string]*series{}}}
	snap := Snapshot{Node: "hub"}
	states := map[string]sender.Status{}
	for i := range 60 {
		name := fmt.Sprintf("plant-%02d", i)
		st := sender.Status{Queue: "orders@" + name, Destination: name, NextHop: name, State: sender.StateConnected}
		switch {
		case i%10 == 3:
			st.State = sender.StateBackingOff
		case i%10 == 7:
			st.State = sender.StateStopped
		case i == 11:
			st.Stalled = true
		case i == 12:
			st.InFlight = 5
		}
		states[name] = st
		snap.Links = append(snap.Links, st)
	}
	for i := range 30 {
		snap.Nodes = append(snap.Nodes, Peer{Name: fmt.Sprintf("a-discovered-node-with-a-long-name-%02d", i), Source: "discovered"})
	}
	v := s.networkView(snap, "")

	drawn := map[string]graphNode{}
	for _, n := range v.Nodes[1:] {
		drawn[n.Name] = n
	}
	if !v.Dense || len(drawn) != maxDense {
		t.Fatalf("%d nodes drawn (dense %v), want %d on a dense ring", len(drawn), v.Dense, maxDense)
	}
	// The 14 links that are not up or are busy are all drawn, their state
	// symbol before their name.
	for name, st := range states {
		if st.State != sender.StateConnected || st.Stalled || st.InFlight > 0 {
			n, ok := drawn[name]
			if !ok {
				t.Errorf("%s (%s) is not drawn", name, stateOf(st).Word)
			} else if want := stateOf(st).Symbol + " " + name; n.Label != want {
				t.Errorf("%s is labelled %q, want %q", name, n.Label, want)
			}
		}
	}
	// Every other node is listed, once; the corner says how many.
	listed := map[string]bool{}
	for _, n := range v.NotDrawn {
		if _, both := drawn[n.Name]; listed[n.Name] || both {
			t.Errorf("%s listed twice, or both drawn and listed", n.Name)
		}
		listed[n.Name] = true
	}
	if len(listed)+len(drawn) != 90 || v.Hidden != len(listed) {
		t.Fatalf("%d drawn and %d listed of 90 nodes, Hidden %d", len(drawn), len(listed), v.Hidden)
	}
	if v.More == nil || !strings.HasPrefix(v.More.Label, fmt.Sprintf("+%d more", v.Hidden)) {
		t.Fatalf("the graph's note of the rest: %+v", v.More)
	}
	if n := v.NotDrawn[len(v.NotDrawn)-1]; n.Kind != "discovered" || n.Hop != nil {
		t.Errorf("the last listed is %+v, want a discovered node without a link", n)
	}
	checkDrawing(t, v)

	// The page draws it: the note links to the list, which has its rows.
	var buf strings.Builder
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	if err := pages["network"].ExecuteTemplate(&buf, "live", v); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if !strings.Contains(html, `href="#not-drawn"`) || !strings.Contains(html, `id="not-drawn"`) ||
		strings.Count(html, "<tr data-hidden=") != v.Hidden || !strings.Contains(html, `class="net dense"`) {
		t.Fatalf("the page lacks the dense ring, the note, the list or its %d rows", v.Hidden)
	}

	// Up to maxDense, every node is drawn, without a note; up to
	// maxSparse, on a sparse ring.
	for _, n := range []int{maxSparse, maxSparse + 1, maxDense} {
		w := s.networkView(Snapshot{Node: "hub", Links: snap.Links[:n]}, "")
		if len(w.Nodes) != n+1 || w.Hidden != 0 || w.More != nil || w.NotDrawn != nil || w.Dense != (n > maxSparse) {
			t.Fatalf("%d links: %d drawn, %d hidden, dense %v", n, len(w.Nodes)-1, w.Hidden, w.Dense)
		}
		checkDrawing(t, w)
	}
}

// checkDrawing checks that the circles of v do not touch and that the
// nodes and their names are inside the graph.
func checkDrawing(t *testing.T, v networkLive) {
	t.Helper()
	inside := func(what string, x, y float64) {
		if x < 0 || x > float64(v.Width) || y < 0 || y > float64(v.Height) {
			t.Errorf("%s at (%.0f, %.0f) is outside the %dx%d graph", what, x, y, v.Width, v.Height)
		}
	}
	for _, a := range v.Nodes {
		inside(a.Name, a.X-a.R, a.Y-a.R)
		inside(a.Name, a.X+a.R, a.Y+a.R)
		if a.Radial {
			// The far end of its name, along the radius.
			w := charW * float64(utf8.RuneCountInString(a.Label))
			r := a.Rotate * math.Pi / 180
			inside(a.Name+"'s name", a.LX+w*math.Cos(r)*map[string]float64{"start": 1, "end": -1}[a.Anchor], a.LY+w*math.Sin(r)*map[string]float64{"start": 1, "end": -1}[a.Anchor])
		} else {
			inside(a.Name+"'s name", a.X, a.Y+a.LabelDY)
		}
		for _, b := range v.Nodes {
			if a.Name < b.Name && math.Hypot(a.X-b.X, a.Y-b.Y) < a.R+b.R+4 {
				t.Errorf("%s and %s overlap", a.Name, b.Name)
			}
		}
	}
}

// A link whose messages are for another node than its next hop draws
// that node beside its relay; a link with no next hop yet is drawn by
// its destination.
func TestRelayedNodeFromLink(t *testing.T) {
	s := &Server{sampler: &sampler{series: map[string]*series{}}}
	v := s.networkView(Snapshot{Node: "a", Links: []sender.Status{
		{Queue: "files@b", Destination: "b", NextHop: "c", State: sender.StateConnected},
		{Queue: "orders@d", Destination: "d", State: sender.StateBackingOff},
	}}, "")
	got := map[string]string{}
	for _, n := range v.Nodes {
		got[n.Name] = n.Kind + ": " + n.Label
	}
	want := map[string]string{"a": "self: a (this node)", "c": "neighbour: c", "b": "relayed: b (via c)", "d": "neighbour: d"}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(v.Routes) != 1 || len(v.Hops) != 2 {
		t.Fatalf("drawn %v with %d routes and %d hops; want %v, 1 route, 2 hops", got, len(v.Routes), len(v.Hops), want)
	}
	checkDrawing(t, v)
}

// A few nodes whose names are too wide for the sparse ring are drawn on a
// dense one, names along the radii.
func TestLongNamesGoDense(t *testing.T) {
	s := &Server{sampler: &sampler{series: map[string]*series{}}}
	var snap Snapshot
	snap.Node = "hub"
	for i := range 8 {
		snap.Nodes = append(snap.Nodes, Peer{Name: fmt.Sprintf("plant-%d-hamburg-north", i)})
	}
	if v := s.networkView(snap, ""); !v.Dense {
		t.Fatal("8 names of 21 characters were drawn on the sparse ring")
	} else {
		checkDrawing(t, v)
	}
	if v := s.networkView(Snapshot{Node: "hub", Nodes: snap.Nodes[:2]}, ""); v.Dense {
		t.Fatal("2 names of 21 characters were drawn on a dense ring")
	}
}

// Durations keep every digit; only zero parts at the end are dropped.
func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {400 * time.Millisecond, "0s"},
		{10 * time.Second, "10s"}, {59*time.Second + 600*time.Millisecond, "1m"},
		{70*time.Second + 450*time.Millisecond, "1m10s"}, {100 * time.Second, "1m40s"},
		{5 * time.Minute, "5m"}, {time.Hour, "1h"}, {time.Hour + 20*time.Minute, "1h20m"},
		{time.Hour + 20*time.Minute + 30*time.Second, "1h20m30s"}, {time.Hour + 30*time.Second, "1h0m30s"},
		{24 * time.Hour, "1d"}, {50 * time.Hour, "2d2h"}, {24*time.Hour + 50*time.Second, "1d50s"},
		{24*time.Hour + 10*time.Minute, "1d10m"},
	} {
		if got := formatDuration(c.d); got != c.want {
			t.Errorf("formatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
