package petrel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// Two addresses share a dead-letter address: replaying through either
// sends each message back to its own destination.
func TestReplayRoutesByDestination(t *testing.T) {
	policy := queue.Policy{MaxDeliveries: 1, DeadLetter: "errors"}
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Addresses = []petrel.AddressConfig{{Name: "a", Queue: policy}, {Name: "b", Queue: policy}}
	}))
	ctx := context.Background()
	p := n.Producer()
	for _, to := range []string{"a", "b", "a"} {
		m := p.CreateDataMessage(to)
		m.Body = []byte(to)
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range []string{"a", "b"} {
		c, err := n.Consumer(addr)
		if err != nil {
			t.Fatal(err)
		}
		for {
			d, err := c.Poll()
			if errors.Is(err, petrel.ErrNoMessage) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			d.Nack("failed")
		}
	}
	n.Sync(ctx)
	if name, err := n.DeadLetterQueue("b"); err != nil || name != "errors" {
		t.Fatalf("dead-letter queue of b: %q, %v", name, err)
	}
	dead, err := n.DeadLetters(ctx, "a", 0)
	if err != nil || len(dead) != 3 || dead[0].Message == nil || string(dead[0].Message.Body) != "a" {
		t.Fatalf("dead letters: %+v, %v", dead, err)
	}
	if got, err := n.Replay(ctx, "a", 0); err != nil || got != 3 {
		t.Fatalf("replay: %d, %v", got, err)
	}
	n.Sync(ctx)
	for name, want := range map[string]int64{"a": 2, "b": 1, "errors": 0} {
		if st, _ := n.QueueStat(name); st.Depth != want {
			t.Fatalf("%s after the replay: %+v, want depth %d", name, st, want)
		}
	}
	if _, err := n.Purge(ctx, "nosuch"); !errors.Is(err, petrel.ErrUnknownQueue) {
		t.Fatalf("purge of an unknown queue: %v", err)
	}
	if got, err := n.Purge(ctx, "a@plant-7"); err != nil || got != 2 {
		t.Fatalf("purge a@plant-7: %d, %v", got, err)
	}
}
