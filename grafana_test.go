package petrel_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The Grafana dashboard reads only metrics the node exports: each name
// in its queries is in the README's table of metrics, which the metrics
// tests hold to the node's registry.
func TestGrafanaDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile("docs/grafana/petrel.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`petrel_[a-z_]+`)
	seen := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				if !strings.Contains(string(readme), "`"+m+"`") {
					t.Errorf("panel %q reads %s, which the README's metrics do not list", p.Title, m)
				}
				seen++
			}
		}
	}
	if seen == 0 {
		t.Fatal("the dashboard reads no petrel metric")
	}
}
