package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// consumerGroup is the consumers of a local bench: they Receive and Ack
// until target messages were acked in all, one fails, or ctx ends.
type consumerGroup struct {
	parent context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	target int64
	acked  atomic.Int64
	// end is when the target-th ack returned. Written by the goroutine that
	// made it, read after wg.Wait.
	end time.Time

	errOnce sync.Once
	err     error
}

func startConsumers(ctx context.Context, c *petrel.Consumer, n int, target int64) *consumerGroup {
	cctx, cancel := context.WithCancel(ctx)
	g := &consumerGroup{parent: ctx, cancel: cancel, target: target}
	g.wg.Add(n)
	for range n {
		go g.consumeLoop(cctx, c)
	}
	return g
}

// consumeLoop is one consumer. Every way out cancels the group, so that
// wait never waits on a consumer blocked in Receive.
func (g *consumerGroup) consumeLoop(ctx context.Context, c *petrel.Consumer) {
	defer g.wg.Done()
	for {
		d, err := c.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				g.fail(err)
			}
			return
		}
		if err := d.Ack(); err != nil {
			g.fail(err)
			return
		}
		if g.acked.Add(1) == g.target {
			g.end = time.Now()
			g.cancel()
		}
	}
}

func (g *consumerGroup) fail(err error) {
	g.errOnce.Do(func() { g.err = err })
	g.cancel()
}

// wait blocks until the consumers stopped and returns how many messages
// they acked and when the last one was.
func (g *consumerGroup) wait() (int64, time.Time, error) {
	g.wg.Wait()
	g.cancel()
	n := g.acked.Load()
	switch {
	case n >= g.target:
		return n, g.end, nil
	case g.err != nil:
		return n, time.Time{}, g.err
	}
	return n, time.Time{}, g.parent.Err()
}

// stop stops the consumers early, when the producers failed.
func (g *consumerGroup) stop() {
	g.cancel()
	g.wg.Wait()
}
