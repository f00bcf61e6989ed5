package console

import (
	"strings"
	"testing"
	"time"

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
	} {
		if got := queueLabel(c.q, relays); got != c.want {
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
