package petrel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// PITFALLS 3, "Dedupe window traps": a window too small to cover a long
// outage. README, Guarantees, Dedupe: a put from another node is dropped,
// and acknowledged, when its (Origin, ID) was accepted into that queue
// within the dedupe window (dedupe_window, default 24 h), which is pruned
// every 60 sweeps; "a resend older than the window is stored again"; the
// window's size is in the queue stats (DedupeEntries), which `petrel stat`
// shows (GET /api/status is "the JSON that petrel stat shows").

// resendOnce opens a new link session (a new session starts again at
// sequence 1, as after a reconnect) from the raw peer site-x to b's orders
// and sends ms; every message must be acked, none refused.
func resendOnce(t *testing.T, b *petrel.Node, ms ...*message.Message) {
	t.Helper()
	c := mustRawPeer(t, b, "site-x", "x", nodeID("site-x"))
	defer c.Close()
	sess, err := c.Open(context.Background(), "orders@b", 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range sendAll(t, sess, ms...) {
		if r != "" {
			t.Fatalf("message %d refused: %s", i, r)
		}
	}
}

// statusQueue reads the orders queue from GET /api/status, the JSON that
// `petrel stat` prints, and the receiver's counters from the same answer.
func statusQueue(t *testing.T, n *petrel.Node, name string) (petrel.QueueStats, petrel.ReceiverStats) {
	t.Helper()
	code, body := adminGet(t, n, "/api/status")
	var st petrel.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/api/status: %d %v %q", code, err, body)
	}
	for _, q := range st.Queues {
		if q.Name == name {
			return q, st.Receiver
		}
	}
	t.Fatalf("/api/status lists no queue %q: %+v", name, st.Queues)
	return petrel.QueueStats{}, petrel.ReceiverStats{}
}

// wantWindow asserts what the user sees of b's orders queue and receiver,
// through the Go API and through /api/status alike.
func wantWindow(t *testing.T, b *petrel.Node, when string, entries, depth, enqueued, deduped int64) {
	t.Helper()
	st, _ := b.QueueStat("orders")
	api, recv := statusQueue(t, b, "orders")
	for _, got := range []struct {
		src string
		q   petrel.QueueStats
	}{{"QueueStat", st}, {"/api/status", api}} {
		if got.q.DedupeEntries != entries || got.q.Depth != depth || got.q.Enqueued != enqueued || got.q.Deduped != deduped {
			t.Fatalf("%s: %s: orders %+v; want dedupe entries %d, depth %d, enqueued %d, deduped %d",
				when, got.src, got.q, entries, depth, enqueued, deduped)
		}
	}
	if r := b.ReceiverStats(); r.Deduped != deduped || recv.Deduped != deduped {
		t.Fatalf("%s: receiver deduped %d (/api/status %d), want %d", when, r.Deduped, recv.Deduped, deduped)
	}
}

// TestDedupeWindowAcrossALongOutage: a peer resends the same (origin, id)
// over a new session 23 h after b first accepted it: b acks and drops it,
// even after pruning ran at that age. 25 h after, past the default 24 h
// window and once a prune forgot it, the resend is stored a second time,
// as the README says. A canary sent two hours before the message proves
// that a prune ran at each step (its entry goes first), so that neither
// step passes only because no prune had run yet.
func TestDedupeWindowAcrossALongOutage(t *testing.T) {
	start := time.Now()
	clk := newTestClock()
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Peers = []petrel.PeerConfig{{Name: "site-x", Secret: "x"}}
		c.Store.Now = clk.Now
		// The default window (24h) stays; sweeps run often, so that the
		// prune every 60 sweeps comes within a second of real time.
		c.Store.SweepInterval = 5 * time.Millisecond
		withAdmin(c)
	}))
	x := nodeID("site-x")
	canary, m := msg(x, 1<<20, "canary"), msg(x, 2<<20, "after the outage")

	resendOnce(t, b, canary)
	clk.Add(2 * time.Hour)
	resendOnce(t, b, m)
	wantWindow(t, b, "both accepted", 2, 2, 2, 0)

	// +23h for m, +25h for the canary: a prune forgets the canary only.
	clk.Add(23 * time.Hour)
	state := func() string { st, _ := b.QueueStat("orders"); return fmt.Sprintf("orders %+v", st) }
	petreltest.Eventually(t, "a prune at +25h forgetting the canary", func() bool {
		st, _ := b.QueueStat("orders")
		return st.DedupeEntries < 2
	}, state)
	resendOnce(t, b, m)
	wantWindow(t, b, "m resent at +23h", 1, 2, 2, 1)

	// +25h for m: once a prune forgot it, its resend is stored again.
	clk.Add(2 * time.Hour)
	petreltest.Eventually(t, "a prune at +25h forgetting m", func() bool {
		st, _ := b.QueueStat("orders")
		return st.DedupeEntries == 0
	}, state)
	resendOnce(t, b, m)
	wantWindow(t, b, "m resent at +25h", 1, 3, 3, 1)
	if r := b.ReceiverStats(); r.Received != 4 || r.Stored != 3 {
		t.Fatalf("receiver %+v; want 4 received, 3 stored", r)
	}
	bodies := drainBodiesAllowing(t, b, "orders", map[string]int{"canary": 1, "after the outage": 2})
	t.Logf("bodies %v, took %v", bodies, time.Since(start).Round(time.Millisecond))
}

// drainBodiesAllowing receives from addr on n, acking each delivery, until
// want's counts arrived, and fails on any other body or an extra copy.
func drainBodiesAllowing(t *testing.T, n *petrel.Node, addr string, want map[string]int) map[string]int {
	t.Helper()
	c, err := n.Consumer(addr)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, k := range want {
		total += k
	}
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	seen := map[string]int{}
	for got := 0; got < total; got++ {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("received %v of %v: %v", seen, want, err)
		}
		body := string(d.Body)
		if seen[body]++; seen[body] > want[body] {
			t.Fatalf("%q arrived %d times, want %d", body, seen[body], want[body])
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := c.Poll(); err == nil {
		t.Fatalf("extra delivery %q", d.Body)
	}
	return seen
}
