package petrel_test

import (
	"context"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
)

// BenchmarkLinkDirect measures messages from a producer at A consumed and
// acked at B, both nodes in this process, over loopback TCP, sync full.
// `petrel bench link` measures the same with each node in its own process.
func BenchmarkLinkDirect(b *testing.B) {
	const syncMode = petrel.SyncFull
	dirB, dirA := b.TempDir(), b.TempDir()
	nb, err := petrel.Open(context.Background(), petrel.Config{Name: "b", DataDir: dirB, Logger: quiet, Listen: "127.0.0.1:0", Store: petrel.StoreConfig{Sync: syncMode}})
	if err != nil {
		b.Fatal(err)
	}
	defer nb.Close()
	na, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: dirA, Logger: quiet, Store: petrel.StoreConfig{Sync: syncMode},
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + nb.ListenAddr()}}})
	if err != nil {
		b.Fatal(err)
	}
	defer na.Close()
	c, _ := nb.Consumer("bench")
	p := na.Producer()
	body := make([]byte, 128)
	b.ResetTimer()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < b.N; i++ {
			d, err := c.Receive(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			d.Ack()
		}
	}()
	var pend []*petrel.Pending
	for i := 0; i < b.N; i++ {
		m := p.CreateDataMessage("bench@b")
		m.Body = body
		pend = append(pend, p.SendAsync(m))
		if len(pend) == 4096 {
			for _, pd := range pend {
				pd.Wait(context.Background())
			}
			pend = pend[:0]
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
