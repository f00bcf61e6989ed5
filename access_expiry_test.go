package petrel_test

import (
	"errors"
	"strings"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// TestAccessWildcardDoesNotReachExpiry: an expiry address, like a
// dead-letter one, is reached only by a pattern that names it exactly.
func TestAccessWildcardDoesNotReachExpiry(t *testing.T) {
	n := openNode(t, "plant-7", "", func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{
			{Name: "orders", Role: address.RoleReceive, Queue: queue.Policy{ExpiryAddress: "orders.expired"}},
			{Name: "payments", Role: address.RoleReceive, Queue: queue.Policy{ExpiryAddress: "late-payments"}},
		}
		c.Access = []petrel.AccessRule{
			{Identity: "app", Send: []string{"*"}, Consume: []string{"orders.*", "late-*"}},
			{Identity: "ops", Consume: []string{"orders.expired", "late-payments"}},
		}
	})
	tests := []struct {
		who    string
		action petrel.Action
		addr   string
		ok     bool
	}{
		{"app", petrel.ActionConsume, "orders.eu", true},
		{"app", petrel.ActionConsume, "orders.expired", false},
		{"app", petrel.ActionSend, "orders.expired", false},
		{"app", petrel.ActionSend, "orders.expired@plant-7", false},
		{"app", petrel.ActionConsume, "late-payments", false},
		{"app", petrel.ActionConsume, "late-orders", true}, // no address expires into it
		{"app", petrel.ActionSend, "orders", true},
		{"ops", petrel.ActionConsume, "orders.expired", true},
		{"ops", petrel.ActionConsume, "late-payments", true},
		{"ops", petrel.ActionSend, "orders.expired", false},
	}
	for _, tt := range tests {
		err := n.Authorize(tt.who, tt.action, tt.addr)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, petrel.ErrDenied) {
			t.Errorf("Authorize(%q, %s, %q) = %v, want allowed %v", tt.who, tt.action, tt.addr, err, tt.ok)
		}
	}
	err := n.Authorize("app", petrel.ActionConsume, "orders.expired")
	if err == nil || !strings.Contains(err.Error(), `"orders.expired" is an expiry address`) {
		t.Errorf("the denial does not say why: %v", err)
	}
}
