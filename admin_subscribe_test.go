package petrel_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestAdminSubscribeStatuses: POST /api/subscribe answers a malformed or
// missing subscription name as a bad request (400), like a malformed
// pattern, and keeps 409 for a name that conflicts with what is: held by
// another pattern. The malformed name answered 409 before.
func TestAdminSubscribeStatuses(t *testing.T) {
	n := nodes.Open(t, withTopics("events.#"), nodes.With(func(c *petrel.Config) { c.Admin.Listen = "127.0.0.1:0" }))
	mustAPI(t, n, "POST", "/api/subscribe", adminapi.SubscribeRequest{Pattern: "events.#", Name: "audit", Count: 1}, nil)
	for _, tc := range []struct {
		req  adminapi.SubscribeRequest
		code int
		says string
	}{
		{adminapi.SubscribeRequest{Pattern: "events.#", Name: "../x", Count: 1}, http.StatusBadRequest, "subscription name"},
		{adminapi.SubscribeRequest{Pattern: "events.#", Name: "a b", Count: 1}, http.StatusBadRequest, "subscription name"},
		{adminapi.SubscribeRequest{Pattern: "events.#", Name: "audit.dlq", Count: 1}, http.StatusBadRequest, `dead-letter queue of subscription \"audit\"`},
		{adminapi.SubscribeRequest{Pattern: "events.+", Name: "x", Count: 1}, http.StatusBadRequest, "events.+"},
		{adminapi.SubscribeRequest{Pattern: "events.door", Name: "audit", Count: 1}, http.StatusConflict, "exists with pattern"},
	} {
		code, raw := apiCall(t, n, "POST", "/api/subscribe", tc.req, nil)
		if code != tc.code || !strings.Contains(raw, tc.says) {
			t.Errorf("subscribe %q as %q: %d %s, want %d saying %q", tc.req.Pattern, tc.req.Name, code, raw, tc.code, tc.says)
		}
	}
}
