package petrel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// TestGracefulShutdownAcksWhatItCommitted stops a receiving node while a
// sender streams to it. The receiver must stop accepting, finish the
// commits of what it took and ack them, then close the session in order:
// so after a restart it holds exactly what the sender saw acked, nothing
// committed and left unacked. (Without the drain, a shutdown cuts the
// connection with commits whose acks are lost: the test then sees more
// committed than acked.)
func TestGracefulShutdownAcksWhatItCommitted(t *testing.T) {
	listen := freeAddr(t)
	bDir := t.TempDir()
	bCfg := petrel.Config{Name: "b", DataDir: bDir, Logger: quiet, Listen: listen, Link: nodes.FastLinks}
	b, err := petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + listen}}
	}))
	p := a.Producer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			m := p.CreateDataMessage("orders@b")
			m.Body = []byte(fmt.Sprint(i))
			p.SendAsync(m)
			if i%100 == 99 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	petreltest.Eventually(t, "over 2000 messages stored at b", func() bool {
		st, _ := b.QueueStat("orders")
		return st.Enqueued > 2000
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	// a's link is down now; what it has acked is final.
	petreltest.Eventually(t, "a's link down with nothing in flight", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].State != "connected" && l[0].InFlight == 0
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	l := a.Links()[0]
	// Reopen b without a listener: nothing more can arrive.
	bCfg.Listen = ""
	b2, err := petrel.Open(context.Background(), bCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	st, _ := b2.QueueStat("orders")
	t.Logf("b committed %d; a saw %d acked", st.Enqueued, l.Acked)
	if st.Enqueued != l.Acked {
		t.Fatalf("b committed %d messages, a saw %d acked: a shutdown must ack every commit", st.Enqueued, l.Acked)
	}
}
