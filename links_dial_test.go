package petrel_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestFailingNeighbourIsDialedOncePerBackoff: a hundred send queues toward
// a neighbour that refuses the handshake (a wrong secret). Each sender
// used to dial on its own backoff, so the neighbour refused a hundred
// handshakes per second and the sending node logged a hundred warnings;
// the pool now keeps a failed dial for its backoff and hands it to every
// sender meanwhile. With the backoff at 1 s, the neighbour sees about one
// handshake a second. The fix of the secret then reaches every queue.
func TestFailingNeighbourIsDialedOncePerBackoff(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Secret = "right" }))
	var logs petreltest.SyncBuffer
	var cfg petrel.Config
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Link = petrel.LinkConfig{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second}
		c.Secret = "wrong"
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		cfg = *c
	}))
	const queues = 100
	p := a.Producer()
	for i := range queues {
		m := p.CreateDataMessage(fmt.Sprintf("q%d@b", i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, "every send queue backing off", func() bool {
		n := 0
		for _, l := range a.Links() {
			if l.State == "backing off" {
				n++
			}
		}
		return n == queues
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	before := b.ReceiverStats().HandshakeFailed
	time.Sleep(3 * time.Second)
	failed := b.ReceiverStats().HandshakeFailed - before
	// 3 s at a backoff of 0.5-1 s: at most 6 dials, and a margin.
	if failed > 10 {
		t.Fatalf("b refused %d handshakes in 3 s from %d send queues toward it: want the queues to share one dial per backoff", failed, queues)
	}
	if n := strings.Count(logs.String(), "link failed; backing off"); n > 0 {
		t.Fatalf("a logged %d warnings of its send queues; want the pool's one line per node", n)
	}
	if n := strings.Count(logs.String(), "dial failed"); n != 1 {
		t.Fatalf("a logged %d lines of failed dials in 3 s, want 1 (once per 30 s per node):\n%s", n, logs.String())
	}

	// The right secret: every queue gets through within the backoff.
	cfg.Secret = "right"
	if _, err := a.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "every send queue delivered", func() bool {
		for _, l := range a.Links() {
			if l.Acked != 1 {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
}
