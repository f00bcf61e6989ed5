package petrel

import (
	"errors"
	"testing"
)

// TestAuthorizeSubscribe checks the check a remote subscription takes: a
// subscribe pattern of the identity's rules must cover the one asked for.
func TestAuthorizeSubscribe(t *testing.T) {
	n := &Node{cfg: Config{Name: "n"}}
	if err := n.authorizeSubscribe("anyone", "#"); err != nil {
		t.Fatalf("no rules: %v", err)
	}
	n.access.set([]AccessRule{{Identity: "app", Subscribe: []string{"orders.#", "alerts.*"}}})
	tests := []struct {
		who, pattern string
		ok           bool
	}{
		{"app", "orders.#", true},
		{"app", "orders.eu.*", true},
		{"app", "orders.*.created", true},
		{"app", "alerts.disk", true},
		{"app", "alerts.*", true},
		{"app", "alerts.#", false},
		{"app", "#", false},
		{"app", "*.eu", false},
		{"other", "orders.#", false},
		{"app", "bad..pattern", false},
	}
	for _, tt := range tests {
		err := n.authorizeSubscribe(tt.who, tt.pattern)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("authorizeSubscribe(%q, %q) = %v, want allowed %v", tt.who, tt.pattern, err, tt.ok)
		}
	}
	if got := n.AccessStats().Denied[ActionSubscribe]; got != 5 {
		t.Errorf("subscribe denials %d, want 5", got)
	}
}
