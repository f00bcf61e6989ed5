package conf

import (
	"strings"
	"testing"
)

func TestTopicsSection(t *testing.T) {
	f, err := Parse("t.yaml", []byte("topics:\n  - pattern: orders.#\n  - pattern: alerts.*\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.NodeConfig()
	if len(cfg.Topics) != 2 || cfg.Topics[0].Pattern != "orders.#" || cfg.Topics[1].Pattern != "alerts.*" {
		t.Fatalf("topics = %+v", cfg.Topics)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"topics:\n  - pattern: orders..x\n", "t.yaml:2"},
		{"topics:\n  - {}\n", "pattern"},
		{"topics:\n  - pattern: a.#\n  - pattern: a.#\n", "declared twice"},
		{"topics:\n  - pattern: orders.#\naddresses:\n  - name: orders.eu\n", "a name is an address or a topic"},
	} {
		_, err := Parse("t.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
}
