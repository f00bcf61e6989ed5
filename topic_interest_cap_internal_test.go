package petrel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
)

// A neighbour that announces pattern after pattern fills the learned
// interest only up to its bound; what is known stays, the rest is dropped
// and counted.
func TestLearnedInterestIsBounded(t *testing.T) {
	ctx := context.Background()
	n, err := Open(ctx, Config{Name: "hub", DataDir: t.TempDir(), Topics: []TopicConfig{{Pattern: "orders.#"}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.topics.remote.max = 3
	for i := range 5 {
		m := n.interestMessage(opSubscribe, fmt.Sprintf("orders.p%d", i), "plant-7", true, []string{"plant-7"})
		if err := n.applyInterest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(n.TopicInterest()); got != 3 {
		t.Fatalf("%d pieces of interest learned, want the bound, 3", got)
	}
	if got := n.topics.interestDropped.Load(); got != 2 {
		t.Fatalf("%d dropped, want 2", got)
	}
}
