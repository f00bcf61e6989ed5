package petrel

import (
	"context"
	"fmt"
	"testing"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// Past maxOpeners send queues being made at once, a send to yet another
// new destination waits for one, and every send still lands, in order.
func TestOpenersAreBounded(t *testing.T) {
	old := maxOpeners
	maxOpeners = 2
	t.Cleanup(func() { maxOpeners = old })
	n, err := Open(context.Background(), Config{Name: "a", DataDir: t.TempDir(), Logger: quietLog,
		Nodes: []NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p := n.Producer()
	const queues, each = 40, 3
	var pend []*Pending
	for i := range each {
		for k := range queues {
			m := p.CreateDataMessage(fmt.Sprintf("q-%d@b", k))
			m.Body = []byte(fmt.Sprint(i))
			pend = append(pend, p.SendAsync(m))
		}
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	n.opening.mu.Lock()
	peak := n.opening.peak
	n.opening.mu.Unlock()
	if peak > maxOpeners || peak == 0 {
		t.Fatalf("%d openers at once, want 1 to %d", peak, maxOpeners)
	}
	WantSendQueues(t, n.store, queues, each, func(_, i int) string { return fmt.Sprint(i) })
}

// WantSendQueues checks, for the tests of both packages, that s holds
// the send queues q-<k>@b for k below queues, each with each messages
// whose bodies are body(k, i), in order.
func WantSendQueues(t *testing.T, s *queue.Store, queues, each int, body func(k, i int) string) {
	t.Helper()
	for k := range queues {
		q, ok := s.Lookup(fmt.Sprintf("q-%d@b", k))
		if !ok {
			t.Fatalf("no send queue q-%d@b", k)
		}
		rows, err := q.Browse(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != each {
			t.Fatalf("q-%d@b holds %d messages, want %d", k, len(rows), each)
		}
		for i, r := range rows {
			m, err := message.Decode(r.Data, message.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if want := body(k, i); string(m.Body) != want {
				t.Fatalf("q-%d@b: message %d is %q, want %q", k, i, m.Body, want)
			}
		}
	}
}
