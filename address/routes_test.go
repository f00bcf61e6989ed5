package address

import (
	"reflect"
	"testing"
)

func TestRoutesNextHop(t *testing.T) {
	r := NewRoutes("plant-7",
		[]string{"hub-1", "hub-2", "hub-1", "", "plant-7"},
		map[string]string{
			"plant-9":  "hub-1",
			"plant-10": "hub-2",
			"hub-2":    "hub-1",   // a neighbour is its own next hop
			"plant-7":  "hub-1",   // self needs no route
			"plant-11": "plant-9", // not through a neighbour: dropped
			"plant-12": "nowhere", // idem
			"":         "hub-1",   // no name: dropped
		})
	tests := []struct {
		node, hop string
		ok        bool
	}{
		{"plant-7", "", false},
		{"hub-1", "hub-1", true},
		{"hub-2", "hub-2", true},
		{"plant-9", "hub-1", true},
		{"plant-10", "hub-2", true},
		{"plant-11", "", false},
		{"plant-12", "", false},
		{"unknown", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			hop, ok := r.NextHop(tt.node)
			if hop != tt.hop || ok != tt.ok {
				t.Errorf("NextHop(%q) = %q, %v; want %q, %v", tt.node, hop, ok, tt.hop, tt.ok)
			}
		})
	}
	want := []string{"hub-1", "hub-2", "plant-10", "plant-9"}
	if got := r.Known(); !reflect.DeepEqual(got, want) {
		t.Errorf("Known() = %q, want %q", got, want)
	}
}

// TestRoutesImmutable checks that the table does not see later changes to
// its inputs, and that callers cannot change it through Known.
func TestRoutesImmutable(t *testing.T) {
	neighbours := []string{"hub-1"}
	via := map[string]string{"far": "hub-1"}
	r := NewRoutes("me", neighbours, via)
	neighbours[0] = "other"
	via["far"] = "other"
	via["new"] = "hub-1"
	r.Known()[0] = "mutated"
	if hop, ok := r.NextHop("far"); hop != "hub-1" || !ok {
		t.Errorf("NextHop(far) = %q, %v after the inputs changed", hop, ok)
	}
	if _, ok := r.NextHop("new"); ok {
		t.Error("a route added to the input map after NewRoutes is used")
	}
	if got := r.Known(); !reflect.DeepEqual(got, []string{"far", "hub-1"}) {
		t.Errorf("Known() = %q", got)
	}
}

func TestRoutesEmpty(t *testing.T) {
	for name, r := range map[string]*Routes{"nil": nil, "empty": NewRoutes("me", nil, nil)} {
		if hop, ok := r.NextHop("x"); ok || hop != "" {
			t.Errorf("%s: NextHop(x) = %q, %v", name, hop, ok)
		}
		if got := r.Known(); len(got) != 0 {
			t.Errorf("%s: Known() = %q", name, got)
		}
	}
}
