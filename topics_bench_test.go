package petrel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// BenchmarkPublish compares a publish to a topic with 8 durable
// subscriptions (8 stored copies) with a send to one anycast address: 128
// B bodies, sync full, 256 sends in flight so that group commit works as
// it does under load. msgs/s counts publishes, not copies.
func BenchmarkPublish(b *testing.B) {
	for _, tc := range []struct {
		name string
		subs int
	}{{"anycast", 0}, {"topic-8-subs", 8}} {
		b.Run(tc.name, func(b *testing.B) {
			n := nodes.Open(b, withTopics("bench.#"))
			dest := "plain"
			for i := 0; i < tc.subs; i++ {
				if _, err := n.Subscribe(context.Background(), "bench.#", petrel.SubscribeOptions{Name: fmt.Sprint("s", i), Durable: true}); err != nil {
					b.Fatal(err)
				}
				dest = "bench.x"
			}
			p := n.Producer()
			body := make([]byte, 128)
			const inFlight = 256
			pend := make([]*petrel.Pending, 0, inFlight)
			wait := func() {
				for _, pd := range pend {
					if err := pd.Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				pend = pend[:0]
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := p.CreateDataMessage(dest)
				m.Body = body
				pend = append(pend, p.SendAsync(m))
				if len(pend) == inFlight {
					wait()
				}
			}
			wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
