package queue

import (
	"context"
	"sync"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// benchMsg is a 128-byte-body data message, the size the targets name.
func benchMsg() *message.Message {
	m := msg(4, "")
	m.Body = make([]byte, 128)
	return m
}

// BenchmarkPutAsync measures enqueue throughput: 64 producers keep puts in
// flight and wait for each window, as SendAsync does.
func BenchmarkPutAsync(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"full", SyncFull}, {"normal", SyncNormal}} {
		b.Run(mode.name, func(b *testing.B) {
			s, _ := openTemp(b, func(c *Config) { c.Sync = mode.sync })
			q := mustQueue(b, s, "q", KindReceive)
			data, _ := benchMsg().MarshalBinary()
			const producers, window = 64, 256
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/producers + 1
			for p := 0; p < producers; p++ {
				wg.Go(func() {
					ops := make([]*Op, 0, window)
					for i := 0; i < per; i++ {
						m := benchMsg()
						op, err := s.Submit([]Put{{Queue: q, Msg: m, Data: data}})
						if err != nil {
							b.Error(err)
							return
						}
						ops = append(ops, op)
						if len(ops) == window || i == per-1 {
							for _, op := range ops {
								if err := op.Wait(context.Background()); err != nil {
									b.Error(err)
									return
								}
							}
							ops = ops[:0]
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			ws := s.WriterStats()
			b.ReportMetric(float64(ws.Requests)/float64(ws.Commits), "reqs/commit")
			b.ReportMetric(float64(ws.CommitNanos)/float64(b.N), "commit-ns/op")
		})
	}
}

// BenchmarkPutPollAck measures the full path through one queue: put,
// poll, ack.
func BenchmarkPutPollAck(b *testing.B) {
	s, _ := openTemp(b, nil)
	q := mustQueue(b, s, "q", KindReceive)
	data, _ := benchMsg().MarshalBinary()
	b.ResetTimer()
	var wg sync.WaitGroup
	wg.Go(func() {
		ops := make([]*Op, 0, 256)
		for i := 0; i < b.N; i++ {
			op, err := s.Submit([]Put{{Queue: q, Msg: benchMsg(), Data: data}})
			if err != nil {
				b.Error(err)
				return
			}
			ops = append(ops, op)
			if len(ops) == cap(ops) {
				for _, op := range ops {
					op.Wait(context.Background())
				}
				ops = ops[:0]
			}
		}
		for _, op := range ops {
			op.Wait(context.Background())
		}
	})
	for i := 0; i < b.N; i++ {
		d, err := q.Receive(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Ack(); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}
