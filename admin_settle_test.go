package petrel_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// withLeasedOrders declares orders with a short lease_timeout, so that a
// test sees an unsettled answer come back.
func withLeasedOrders(c *petrel.Config) {
	withAdmin(c)
	c.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleReceive, Queue: queue.Policy{LeaseTimeout: time.Second}}}
}

// sendOrders sends n data messages to orders through the admin API.
func sendOrdersAPI(t *testing.T, n *petrel.Node, count int) {
	t.Helper()
	for i := range count {
		text := fmt.Sprint("order ", i)
		mustAPI(t, n, "POST", adminapi.PathSend, adminapi.SendRequest{To: "orders", Text: &text}, nil)
	}
}

// ordersStats is the figures of orders.
func ordersStats(t *testing.T, n *petrel.Node) petrel.QueueStats {
	t.Helper()
	var stats []petrel.QueueStats
	mustAPI(t, n, "GET", adminapi.PathQueues, nil, &stats)
	for _, s := range stats {
		if s.Name == "orders" {
			return s
		}
	}
	t.Fatalf("no orders in %+v", stats)
	return petrel.QueueStats{}
}

// TestAdminAPISettleLater: settle "later" answers the messages and
// settles nothing; POST /api/settle acks (or nacks) them once, and an
// answer never settled comes back when its lease_timeout passes, so a
// client killed before it had the messages safe loses none.
func TestAdminAPISettleLater(t *testing.T) {
	n := nodes.Open(t, nodes.With(withLeasedOrders))
	sendOrdersAPI(t, n, 3)

	var got adminapi.RecvResponse
	before := time.Now()
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Count: 2, Settle: adminapi.SettleLater}, &got)
	if len(got.Messages) != 2 || got.Settled != adminapi.SettleLater || len(got.Lease) != 32 ||
		got.LeaseExpires.Before(before.Add(time.Second-10*time.Millisecond)) || got.LeaseExpires.After(time.Now().Add(time.Second)) {
		t.Fatalf("recv with settle later answered %+v", got)
	}
	if s := ordersStats(t, n); s.Acked != 0 || s.InFlight != 2 {
		t.Fatalf("after the answer, before the settle: %+v", s)
	}
	if m := scrape(t, n); m["petrel_admin_leases"] != 1 {
		t.Fatalf("petrel_admin_leases = %v, want 1", m["petrel_admin_leases"])
	}
	var settled adminapi.SettleResponse
	mustAPI(t, n, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: got.Lease}, &settled)
	if settled != (adminapi.SettleResponse{Settled: adminapi.SettleAck, Count: 2}) {
		t.Fatalf("settle answered %+v", settled)
	}
	// Durable before the answer.
	if s := ordersStats(t, n); s.Acked != 2 || s.Depth != 1 {
		t.Fatalf("after the settle: %+v", s)
	}
	// Once only.
	if code, body := apiCall(t, n, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: got.Lease}, nil); code != http.StatusNotFound || !strings.Contains(body, "unknown lease") {
		t.Fatalf("a second settle of the lease: %d %s", code, body)
	}

	// Never settled: the message comes back after its lease_timeout, and
	// the lease is gone with it.
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Settle: adminapi.SettleLater}, &got)
	if len(got.Messages) != 1 {
		t.Fatalf("recv answered %+v", got)
	}
	id := got.Messages[0].ID
	var again adminapi.RecvResponse
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Wait: 10 * time.Second, Settle: adminapi.SettleLater}, &again)
	if len(again.Messages) != 1 || again.Messages[0].ID != id || again.Messages[0].Attempt != 2 {
		t.Fatalf("after the lease passed: %+v, want message %d again, attempt 2", again, id)
	}
	if code, body := apiCall(t, n, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: got.Lease}, nil); code != http.StatusNotFound {
		t.Fatalf("settle of an expired lease: %d %s", code, body)
	}
	// A nack counts the delivery and keeps the message.
	mustAPI(t, n, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: again.Lease, Settle: adminapi.SettleNack, Reason: "later"}, &settled)
	if settled.Settled != adminapi.SettleNack || settled.Count != 1 {
		t.Fatalf("nack answered %+v", settled)
	}
	if s := ordersStats(t, n); s.Acked != 2 || s.Depth != 1 {
		t.Fatalf("after the nack: %+v", s)
	}
	if m := scrape(t, n); m["petrel_admin_leases"] != 0 {
		t.Fatalf("petrel_admin_leases = %v, want 0", m["petrel_admin_leases"])
	}

	// Malformed settles.
	for _, bad := range []adminapi.SettleRequest{{}, {Lease: "x", Settle: "later"}} {
		if code, body := apiCall(t, n, "POST", adminapi.PathSettle, bad, nil); code != http.StatusBadRequest {
			t.Errorf("settle %+v: %d %s", bad, code, body)
		}
	}
	// A private subscription ends with its request: nothing to settle later.
	if code, body := apiCall(t, n, "POST", adminapi.PathSubscribe, adminapi.SubscribeRequest{Pattern: "orders.#", Wait: time.Millisecond, Settle: adminapi.SettleLater}, nil); code != http.StatusBadRequest || !strings.Contains(body, "durable") {
		t.Errorf("subscribe, private, settle later: %d %s", code, body)
	}
}

// TestAdminAPISettleLaterBound: the answers that wait for a settle are
// bounded; the request past the bound is refused before it takes any
// message, counted, and one settle makes room again.
func TestAdminAPISettleLaterBound(t *testing.T) {
	defer petrel.SetAdminLeaseBound(petrel.SetAdminLeaseBound(2))
	n := nodes.Open(t, nodes.With(withLeasedOrders))
	sendOrdersAPI(t, n, 4)
	var leases []string
	for range 2 {
		var got adminapi.RecvResponse
		mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Settle: adminapi.SettleLater}, &got)
		leases = append(leases, got.Lease)
	}
	code, body := apiCall(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Settle: adminapi.SettleLater}, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many answers wait") {
		t.Fatalf("recv past the bound: %d %s", code, body)
	}
	if s := ordersStats(t, n); s.InFlight != 2 {
		t.Fatalf("the refused request took messages: %+v", s)
	}
	m := scrape(t, n)
	if m["petrel_admin_leases"] != 2 || m["petrel_admin_leases_refused_total"] != 1 {
		t.Fatalf("metrics: leases %v, refused %v", m["petrel_admin_leases"], m["petrel_admin_leases_refused_total"])
	}
	mustAPI(t, n, "POST", adminapi.PathSettle, adminapi.SettleRequest{Lease: leases[0]}, nil)
	var got adminapi.RecvResponse
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Settle: adminapi.SettleLater}, &got)
	if len(got.Messages) != 1 {
		t.Fatalf("recv after a settle made room: %+v", got)
	}
	if m := scrape(t, n); m["petrel_admin_leases"] != 2 {
		t.Fatalf("petrel_admin_leases = %v, want 2", m["petrel_admin_leases"])
	}
}
