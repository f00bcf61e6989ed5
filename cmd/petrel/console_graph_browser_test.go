package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The sparse graph's text in Chromium: a node whose links to 3
// neighbours, then to 12, are all down and backing off (the longest state,
// "↻ down (backing off)"); no text drawn on the graph (the links' labels,
// the nodes' names) may overlap another, cross a node's circle or leave
// the graph, as the browser lays the page out.
func TestConsoleNetworkLabelsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; without -short")
	}
	shots := screenshotDir(t)
	ctx := newBrowser(t)
	for _, c := range []struct {
		what  string
		names []string
	}{
		{"3 neighbours", []string{"b", "c", "d"}},
		{"12 neighbours", []string{"plant-00", "plant-01", "plant-02", "plant-03", "plant-04", "plant-05",
			"plant-06", "plant-07", "plant-08", "plant-09", "plant-10", "plant-11"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "a.yaml")
			var cfg strings.Builder
			fmt.Fprintf(&cfg, "node: {name: a, data_dir: %s}\nadmin:\n  listen: \"127.0.0.1:0\"\nnodes:\n", filepath.Join(dir, "a"))
			for _, name := range c.names {
				// Nothing listens on port 1: the link backs off.
				fmt.Fprintf(&cfg, "  - {name: %s, connector: \"tcp://127.0.0.1:1\"}\n", name)
			}
			writeFile(t, cfgPath, cfg.String())
			base := "http://" + startNode(t, dir, "-c", cfgPath).ready(t)["admin"]
			for _, name := range c.names {
				runPetrel(t, time.Minute, "send", "-c", cfgPath, "x@"+name, "hi").wantCode(t, 0)
			}
			if err := do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("svg.net"))); err != nil {
				t.Fatal(err)
			}
			for _, name := range c.names {
				waitText(t, ctx, "the link to "+name+" drawn backing off", fmt.Sprintf(`svg.net a[data-hop=%q] text`, name),
					func(s string) bool { return strings.Contains(s, "↻ down (backing off)") })
			}
			js := `(function(){
var svg = document.querySelector('svg.net'), frame = svg.getBoundingClientRect();
function screen(x, y, m) { var p = svg.createSVGPoint(); p.x = x; p.y = y; return p.matrixTransform(m); }
var texts = [].map.call(svg.querySelectorAll('text:not(.kind)'), function(e) {
  var b = e.getBBox(), m = e.getScreenCTM(), p = screen(b.x, b.y, m), q = screen(b.x + b.width, b.y + b.height, m);
  var edge = e.closest('a.edge'), n = edge ? 'the label of the link to ' + edge.getAttribute('data-hop') : JSON.stringify(e.textContent);
  return {n: n, l: Math.min(p.x, q.x), r: Math.max(p.x, q.x), t: Math.min(p.y, q.y), b: Math.max(p.y, q.y)};
});
var circles = [].map.call(svg.querySelectorAll('circle'), function(e) {
  var m = e.getScreenCTM(), c = screen(e.cx.baseVal.value, e.cy.baseVal.value, m);
  return {n: e.parentNode.getAttribute('data-node'), x: c.x, y: c.y, r: e.r.baseVal.value * m.a};
});
var bad = [];
texts.forEach(function(a, i) {
  if (a.l < frame.left - 1 || a.t < frame.top - 1 || a.r > frame.right + 1 || a.b > frame.bottom + 1) { bad.push(a.n + ' leaves the graph'); }
  texts.slice(i + 1).forEach(function(b) {
    if (a.l < b.r - 1 && b.l < a.r - 1 && a.t < b.b - 1 && b.t < a.b - 1) { bad.push(a.n + ' overlaps ' + b.n); }
  });
  circles.forEach(function(c) {
    var dx = c.x - Math.max(a.l, Math.min(c.x, a.r)), dy = c.y - Math.max(a.t, Math.min(c.y, a.b));
    if (Math.hypot(dx, dy) < c.r - 1) { bad.push(a.n + ' crosses the circle of ' + c.n); }
  });
});
var labels = [].map.call(svg.querySelectorAll('a.edge text'), function(e) { return e.textContent; });
return JSON.stringify({texts: texts.length, labels: labels, dense: svg.classList.contains('dense'), bad: bad});
})()`
			out, err := runTab(ctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Texts  int
				Labels []string
				Dense  bool
				Bad    []string
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d texts; the links read %q", got.Texts, got.Labels)
			// This node's name, the neighbours' names, one label per link.
			if got.Dense || got.Texts != 1+2*len(c.names) || len(got.Labels) != len(c.names) {
				t.Errorf("%d texts, %d link labels drawn (dense %v); want %d and %d on a sparse ring",
					got.Texts, len(got.Labels), got.Dense, 1+2*len(c.names), len(c.names))
			}
			for _, l := range got.Labels {
				if !strings.Contains(l, "0 · 0.0/s") {
					t.Errorf("a link reads %q, without its figures", l)
				}
			}
			if len(got.Bad) > 0 {
				t.Errorf("the graph's text overlaps: %s", strings.Join(got.Bad, "; "))
			}
			screenshot(t, ctx, shots, "network-"+strings.ReplaceAll(c.what, " ", "-"))
		})
	}
}
