package petrel

import (
	"context"
	"fmt"
	"testing"

	"github.com/petrelmq/petrel/message"
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
	for k := range queues {
		q, ok := n.store.Lookup(fmt.Sprintf("q-%d@b", k))
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
			if string(m.Body) != fmt.Sprint(i) {
				t.Fatalf("q-%d@b: message %d is %q", k, i, m.Body)
			}
		}
	}
}
