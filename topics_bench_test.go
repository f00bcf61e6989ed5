package petrel_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

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
			b.ResetTimer()
			sendWindowed(b, n.Producer(), dest)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// sendWindowed sends b.N messages of 128 B to dest, 256 in flight, and
// waits for them all.
func sendWindowed(b *testing.B, p *petrel.Producer, dest string) { sendN(b, p, dest, b.N) }

// sendN sends n messages as sendWindowed does.
func sendN(b *testing.B, p *petrel.Producer, dest string, n int) {
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
	for range n {
		m := p.CreateDataMessage(dest)
		m.Body = body
		pend = append(pend, p.SendAsync(m))
		if len(pend) == inFlight {
			wait()
		}
	}
	wait()
}

// BenchmarkFanoutDrain measures the consumers' side of a fan-out: the
// publishes to 8 durable subscriptions are stored first, untimed, then 8
// consumers, one per subscription, take and Ack every copy, until the
// acks are committed. An op is one copy. cpu-ns/copy is the process's CPU
// time (user and system, every goroutine: consumers, the writer, GC) per
// copy, which a loaded machine moves far less than the wall time. The
// consumers take one copy per Receive (receive, the baseline), or up to
// 64 per ReceiveBatch (batch-64).
func BenchmarkFanoutDrain(b *testing.B) {
	b.Run("receive", func(b *testing.B) { benchFanoutDrain(b, 1) })
	b.Run("batch-64", func(b *testing.B) { benchFanoutDrain(b, 64) })
}

func benchFanoutDrain(b *testing.B, batch int) {
	const subs = 8
	n := nodes.Open(b, withTopics("bench.#"))
	cs := make([]*petrel.Consumer, subs)
	for i := range cs {
		c, err := n.Subscribe(context.Background(), "bench.#", petrel.SubscribeOptions{Name: fmt.Sprint("s", i), Durable: true})
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	p := n.Producer()
	body := make([]byte, 128)
	msgs := max(b.N/subs, 1)
	pend := make([]*petrel.Pending, 0, msgs)
	for range msgs {
		m := p.CreateDataMessage("bench.x")
		m.Body = body
		pend = append(pend, p.SendAsync(m))
	}
	for _, pd := range pend {
		if err := pd.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuTime(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, subs)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for taken := 0; taken < msgs; {
				ds, err := receiveN(c, min(batch, msgs-taken))
				for _, d := range ds {
					if err == nil {
						err = d.Ack()
					}
				}
				if err != nil {
					errs <- err
					return
				}
				taken += len(ds)
			}
		}()
	}
	wg.Wait()
	if err := n.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	copies := float64(msgs * subs)
	b.ReportMetric(float64(cpuTime(b)-cpu0)/copies, "cpu-ns/copy")
	b.ReportMetric(copies/b.Elapsed().Seconds(), "copies/s")
}

// cpuTime is the process's CPU time so far, user and system, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// receiveN takes up to n deliveries: one Receive when n is 1, one
// ReceiveBatch otherwise.
func receiveN(c *petrel.Consumer, n int) ([]*petrel.Delivery, error) {
	if n == 1 {
		d, err := c.Receive(context.Background())
		if err != nil {
			return nil, err
		}
		return []*petrel.Delivery{d}, nil
	}
	return c.ReceiveBatch(context.Background(), n)
}

// BenchmarkPublishAmongSubscriptions publishes to a topic one durable
// subscription matches, beside others subscriptions that match other
// topics: a publish should cost the same whatever their number. Sends as
// BenchmarkPublish does.
func BenchmarkPublishAmongSubscriptions(b *testing.B) {
	for _, others := range []int{0, 2000} {
		b.Run(fmt.Sprint("others-", others), func(b *testing.B) {
			n := nodes.Open(b, withTopics("bench.#", "other.#"))
			if _, err := n.Subscribe(context.Background(), "bench.#", petrel.SubscribeOptions{Name: "s", Durable: true}); err != nil {
				b.Fatal(err)
			}
			for i := range others {
				c, err := n.Subscribe(context.Background(), fmt.Sprintf("other.%d.*", i), petrel.SubscribeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
			}
			cpu0 := cpuTime(b)
			b.ResetTimer()
			sendWindowed(b, n.Producer(), "bench.x")
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/msg")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkPublishToKeep publishes to a topic space whose keep queue
// holds 50,000 publishes (no subscription): each publish is held. With
// keep.messages 50,000 (full) the janitor drops the oldest past the bound
// as publishes come; with room (keep.messages 10,000,000) it has nothing
// to drop, the baseline. cpu-ns/publish is the process's CPU per
// publish, the janitor's trims included, until the queue is back at its
// bound.
func BenchmarkPublishToKeep(b *testing.B) {
	const held = 50_000
	for _, tc := range []struct {
		name string
		keep int
	}{{"full", held}, {"room", 10_000_000}} {
		b.Run(tc.name, func(b *testing.B) {
			n := nodes.Open(b, nodes.With(func(c *petrel.Config) {
				c.Topics = []petrel.TopicConfig{{Pattern: "bench.#", Keep: petrel.TopicKeep{Messages: tc.keep}}}
			}))
			keepQ := "topic:keep:bench.#"
			p := n.Producer()
			sendN(b, p, "bench.x", held)
			b.ResetTimer()
			cpu0 := cpuTime(b)
			sendWindowed(b, p, "bench.x")
			for {
				st, ok := n.QueueStat(keepQ)
				if !ok {
					b.Fatalf("no queue %q", keepQ)
				}
				if st.Depth <= int64(tc.keep) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/publish")
		})
	}
}

// BenchmarkPublishToDevices publishes to the topics of many devices, each
// with a subscription of its own (dev.<i>.cmd), round the devices: more
// distinct topics than a node keeps answers for, so that each publish
// finds its subscriptions afresh, as a broker serving many devices does.
func BenchmarkPublishToDevices(b *testing.B) {
	for _, devices := range []int{100, 5000} {
		b.Run(fmt.Sprint("devices-", devices), func(b *testing.B) {
			n := nodes.Open(b, withTopics("dev.#"))
			for i := range devices {
				c, err := n.Subscribe(context.Background(), fmt.Sprintf("dev.%d.cmd", i), petrel.SubscribeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
			}
			p := n.Producer()
			body := make([]byte, 128)
			pend := make([]*petrel.Pending, 0, 256)
			wait := func() {
				for _, pd := range pend {
					if err := pd.Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				pend = pend[:0]
			}
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for i := range b.N {
				m := p.CreateDataMessage(fmt.Sprintf("dev.%d.cmd", (i*7919)%devices))
				m.Body = body
				if pend = append(pend, p.SendAsync(m)); len(pend) == cap(pend) {
					wait()
				}
			}
			wait()
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/msg")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
