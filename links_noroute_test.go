package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
	bCfg := stoppedNode(t, "b")
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

	b, err := petrel.Open(context.Background(), bCfg)
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

// TestSendQueuesWithoutRouteLogOnceAndWait: a hundred send queues toward
// neighbour B, which is down, then a reload removes B. Each sender used
// to log a warning at every backoff (at most 1 s) for as long as no route
// returned: a hundred lines a second. The lack of a route is now logged
// once per 30 s for B, and the senders wait up to 30 s before they look
// again, but at once when a reload brings B back.
func TestSendQueuesWithoutRouteLogOnceAndWait(t *testing.T) {
	bCfg := stoppedNode(t, "b")
	var logs petreltest.SyncBuffer
	withB := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Link:  petrel.LinkConfig{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second},
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + bCfg.Listen}}}
	a, err := petrel.Open(context.Background(), withB)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const queues = 100
	p := a.Producer()
	for i := range queues {
		if err := p.Send(context.Background(), p.CreateDataMessage(fmt.Sprintf("q%d@b", i))); err != nil {
			t.Fatal(err)
		}
	}
	withoutB := withB
	withoutB.Nodes = nil
	if _, err := a.Reconfigure(context.Background(), withoutB); err != nil {
		t.Fatal(err)
	}
	reconnects := func() (n int64) {
		for _, l := range a.Links() {
			n += l.Reconnects
		}
		return n
	}
	petreltest.Eventually(t, "every send queue without a route", func() bool {
		for _, l := range a.Links() {
			if !strings.Contains(l.LastError, "no route") {
				return false
			}
		}
		return len(a.Links()) == queues
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	before := reconnects()
	time.Sleep(3 * time.Second)
	// At a backoff of 0.5-1 s, 300 to 600 tries; each sender now waits
	// 15-30 s after its first try without a route.
	if tries := reconnects() - before; tries > queues/2 {
		t.Fatalf("the %d send queues without a route tried %d times in 3 s: want them to back off", queues, tries)
	}
	if n, m := strings.Count(logs.String(), `msg="no route to node`), strings.Count(logs.String(), "link failed"); n != 1 || m != 0 {
		t.Fatalf("a logged %d lines of no route and %d of failed links for %d send queues without a route, want 1 and 0 (once per 30 s per node):\n%s",
			n, m, queues, logs.String())
	}

	b, err := petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Reconfigure(context.Background(), withB); err != nil {
		t.Fatal(err)
	}
	// Well within the senders' 15-30 s wait: the reload wakes them.
	deadline := time.Now().Add(5 * time.Second)
	for acked := 0; acked < queues; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d send queues delivered 5 s after a reload brought B back: %+v", acked, queues, a.Links())
		}
		time.Sleep(20 * time.Millisecond)
		acked = 0
		for _, l := range a.Links() {
			acked += int(l.Acked)
		}
	}
}

// stoppedNode opens a node called name on a free port and closes it: the
// Config returned opens it again, at the same address, which its
// neighbours' configurations can name before it runs.
func stoppedNode(t *testing.T, name string) petrel.Config {
	t.Helper()
	cfg := petrel.Config{Name: name, DataDir: t.TempDir(), Logger: quiet, Link: nodes.FastLinks, Listen: "127.0.0.1:0"}
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = n.ListenAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
