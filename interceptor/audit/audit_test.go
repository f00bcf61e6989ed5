package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/interceptor/audit"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lines is a log sink safe for the node's goroutines.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// events returns the audit lines, decoded.
func (l *lines) events(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func count(es []map[string]any, event, path string) int {
	n := 0
	for _, e := range es {
		if e[audit.KeyEvent] == event && e[audit.KeyPath] == path {
			n++
		}
	}
	return n
}

func open(t *testing.T, opts audit.Options) (*petrel.Node, *lines) {
	out := &lines{}
	log := slog.New(slog.NewJSONHandler(out, nil))
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Interceptors = []petrel.Interceptor{audit.New(log, opts)}
	}))
	return n, out
}

// sendAndTake sends k messages to orders through ep and takes and acks
// them through the same endpoint.
func sendAndTake(t *testing.T, ep petrel.Endpoint, k int) {
	t.Helper()
	ctx := context.Background()
	p := ep.Producer()
	for i := range k {
		m := p.CreateDataMessage("orders")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ep.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range k {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditLinesForEveryPath: one line per publish, delivery and ack, on
// the embedded path and a remote client's, with the message and who.
func TestAuditLinesForEveryPath(t *testing.T) {
	n, out := open(t, audit.Options{})
	sendAndTake(t, n, 2)
	c := nodes.Dial(t, n, petrel.DialOptions{Name: "app-1"})
	sendAndTake(t, c, 3)
	c.Close() // its acks are sent, then the node's hooks see them
	petreltest.Eventually(t, "an audit line per publish, delivery and ack", func() bool {
		es := out.events(t)
		return count(es, "ack", "embedded") == 2 && count(es, "ack", "client") == 3
	}, func() string { return out.buf.String() })
	es := out.events(t)
	for _, want := range []struct {
		event, path string
		n           int
	}{{"publish", "embedded", 2}, {"deliver", "embedded", 2}, {"publish", "client", 3}, {"deliver", "client", 3}} {
		if got := count(es, want.event, want.path); got != want.n {
			t.Errorf("%s lines on %s: %d, want %d", want.event, want.path, got, want.n)
		}
	}
	for _, e := range es {
		if e[audit.KeyID] == nil || e[audit.KeyOrigin] == "" {
			t.Errorf("line without its message: %v", e)
		}
		if e[audit.KeyPath] == "client" && (e[audit.KeyIdentity] != "app-1" || e[audit.KeyRemote] == nil) {
			t.Errorf("client line without its identity and address: %v", e)
		}
		if e[audit.KeyPath] == "embedded" && e[audit.KeyIdentity] != "plant-7" {
			t.Errorf("embedded line without the node's name: %v", e)
		}
		if e[audit.KeyEvent] != "ack" && e[audit.KeyDestination] != "orders" {
			t.Errorf("line without its destination: %v", e)
		}
	}
}

// TestAuditSampling: EveryN 3 logs the first of every three events of
// each kind.
func TestAuditSampling(t *testing.T) {
	n, out := open(t, audit.Options{EveryN: 3})
	sendAndTake(t, n, 7)
	es := out.events(t)
	for _, event := range []string{"publish", "deliver", "ack"} {
		if got := count(es, event, "embedded"); got != 3 { // events 1, 4 and 7
			t.Errorf("%s lines: %d, want 3", event, got)
		}
	}
}
