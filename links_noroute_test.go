package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestSendToNeighbourRemovedByReloadFailsWithNoRoute: A queues a message
// toward its neighbour B, which is down, then a reload removes B from A's
// nodes. A send to B used to find B's send queue and be stored there, acked
// to the producer, with nothing to take it; it now fails with ErrNoRoute,
// as a send to a node never known does, by Send and by SendAsync. The
// message that waited stays, shown as its link's depth with the reason,
// and goes once a reload brings B back.
func TestSendToNeighbourRemovedByReloadFailsWithNoRoute(t *testing.T) {
	bDir := t.TempDir()
	bCfg := petrel.Config{Name: "b", DataDir: bDir, Logger: quiet, Link: nodes.FastLinks, Listen: "127.0.0.1:0"}
	b, err := petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	bCfg.Listen = b.ListenAddr() // B comes back at the same address
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	withB := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet, Link: nodes.FastLinks,
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bCfg.Listen}}}
	a, err := petrel.Open(context.Background(), withB)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := a.Producer()
	m := p.CreateDataMessage("orders@b")
	m.Body = []byte("before")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatalf("send to a neighbour that is down: %v", err)
	}

	withoutB := withB
	withoutB.Nodes = nil
	if _, err := a.Reconfigure(context.Background(), withoutB); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), p.CreateDataMessage("orders@b")); !errors.Is(err, petrel.ErrNoRoute) {
		t.Fatalf("Send to a neighbour removed by a reload, whose send queue exists: %v, want ErrNoRoute", err)
	}
	if err := p.SendAsync(p.CreateDataMessage("orders@b")).Wait(context.Background()); !errors.Is(err, petrel.ErrNoRoute) {
		t.Fatalf("SendAsync to a neighbour removed by a reload, whose send queue exists: %v, want ErrNoRoute", err)
	}
	petreltest.Eventually(t, "the message that waited kept, its link backing off for want of a route", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Depth == 1 && l[0].State == "backing off" && strings.Contains(l[0].LastError, `no route to node "b"`)
	}, func() string { return fmt.Sprintf("%+v", a.Links()) })

	b, err = petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Reconfigure(context.Background(), withB); err != nil {
		t.Fatal(err)
	}
	m = p.CreateDataMessage("orders@b")
	m.Body = []byte("after")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatalf("send once B is a neighbour again: %v", err)
	}
	drainBodies(t, b, "orders", []string{"before", "after"}, a)
}
