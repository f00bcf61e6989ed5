package petrel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// A producer that sends to many new destinations at once must not make
// their send queues one commit after the other, and the messages of each
// queue must keep their order and all arrive once.
func TestNewSendQueuesShareCommitsAndKeepOrder(t *testing.T) {
	addr := freeAddr(t) // b comes up there once a has queued everything
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + addr}}
	}))
	const queues, each = 300, 4
	before := a.Store().WriterStats().Commits
	p := a.Producer()
	var pend []*petrel.Pending
	for i := range each {
		for k := range queues {
			m := p.CreateDataMessage(fmt.Sprintf("q-%d@b", k))
			m.Body = []byte(fmt.Sprintf("%d-%d", k, i))
			pend = append(pend, p.SendAsync(m))
		}
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// One commit per queue would be at least 300, before any message's.
	// Shared, they are a few (5 to 14 in 25 runs alone), but a machine
	// busy with other tests splits the writer's batches further: 152 in
	// one full run of the suite. Only 300 or more says one by one.
	if commits := a.Store().WriterStats().Commits - before; commits >= queues {
		t.Fatalf("%d commits for %d new send queues and %d messages: the queues were made one by one", commits, queues, queues*each)
	}
	petrel.WantSendQueues(t, a.Store(), queues, each, func(k, i int) string { return fmt.Sprintf("%d-%d", k, i) })
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen(addr))
	petreltest.Eventually(t, "every send queue drained to b", func() bool {
		for k := range queues {
			if st, ok := b.QueueStat(fmt.Sprintf("q-%d", k)); !ok || st.Enqueued != each {
				return false
			}
		}
		for _, l := range a.Links() {
			if l.Depth != 0 || l.Acked != each {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%d links", len(a.Links())) })
}

// Sends into send queues still being made complete, one way or the other,
// when the node closes under them: no Pending stays open past Close.
func TestCloseWhileSendQueuesAreMade(t *testing.T) {
	a, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet,
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := a.Producer()
	var pend []*petrel.Pending
	for k := range 200 {
		m := p.CreateDataMessage(fmt.Sprintf("q-%d@b", k))
		pend = append(pend, p.SendAsync(m))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i, pd := range pend {
		select {
		case <-pd.Done():
		default:
			t.Fatalf("send %d still pending after Close", i)
		}
	}
}
