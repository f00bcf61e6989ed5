package petrel_test

import (
	"context"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// With a byte window of a few messages, a client's publishes flow through
// a real node, the window filling and emptying thousands of times: bytes
// are given back as acks arrive, and a message larger than the whole
// window still goes, alone. Every message is stored, in order.
func TestRemoteWindowBytesFlows(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Dial(t, n, petrel.DialOptions{WindowBytes: 2048})
	p := c.Producer()
	const count = 2000
	pending := make([]*petrel.Pending, 0, count+1)
	for i := range count {
		m := p.CreateDataMessage("orders")
		m.Body = make([]byte, 100)
		m.Body[0] = byte(i)
		pending = append(pending, p.SendAsync(m))
	}
	big := p.CreateDataMessage("orders")
	big.Body = make([]byte, 8192) // four times the window
	pending = append(pending, p.SendAsync(big))
	for i, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	cons := consumer(t, c, "orders")
	for i := range count {
		d := receive(t, cons)
		if len(d.Body) != 100 || d.Body[0] != byte(i) {
			t.Fatalf("message %d: body of %d bytes starting %d, want 100 starting %d", i, len(d.Body), d.Body[0], byte(i))
		}
		d.Ack()
	}
	if d := receive(t, cons); len(d.Body) != 8192 {
		t.Fatalf("last message: %d bytes, want the 8192 of the large one", len(d.Body))
	}
}
