package bench

import (
	"context"
	"sync"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// drainers are the fan-out bench's consumers, one per subscription: each
// Receives and Acks until its subscription delivered target messages,
// timing each from its publish (the message's Timestamp, set at submit)
// into a histogram of its own, merged into lat as it ends.
type drainers struct {
	parent context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	target int64
	batch  int // messages a consumer takes per ReceiveBatch

	mu    sync.Mutex
	total int64
	end   time.Time // the last ack of all
	lat   latencyHist
	err   error
}

func startDrainers(ctx context.Context, subs []*petrel.Consumer, target int64, batch int) *drainers {
	cctx, cancel := context.WithCancel(ctx)
	g := &drainers{parent: ctx, cancel: cancel, target: target, batch: max(batch, 1)}
	g.wg.Add(len(subs))
	for _, c := range subs {
		go g.drain(cctx, c)
	}
	return g
}

// drain is one subscription's consumer. A failure cancels the others, so
// that wait never waits on one blocked in Receive.
func (g *drainers) drain(ctx context.Context, c *petrel.Consumer) {
	defer g.wg.Done()
	lat := new(latencyHist)
	var n int64
	var err error
	for n < g.target {
		var ds []*petrel.Delivery
		if ds, err = c.ReceiveBatch(ctx, int(min(g.target-n, int64(g.batch)))); err != nil {
			break
		}
		// The batch was taken at one moment: one reading of the clock
		// times all of it.
		now := time.Now()
		for _, d := range ds {
			lat.add(now.Sub(d.Timestamp))
			if err = d.Ack(); err != nil {
				break
			}
			n++
		}
		if err != nil {
			break
		}
	}
	// The loop's last ack is this drainer's: reading the clock once here
	// rather than after every ack leaves each copy ~50 ns to the node,
	// and moves the figure by the loop's exit only.
	last := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total += n
	g.lat.merge(lat)
	if last.After(g.end) {
		g.end = last
	}
	if err != nil && g.err == nil {
		g.err = err
		g.cancel()
	}
}

// wait blocks until every drainer stopped and returns the copies acked,
// when the last was, and their latencies.
func (g *drainers) wait() (int64, time.Time, *latencyHist, error) {
	g.wg.Wait()
	g.cancel()
	if g.err != nil {
		if g.parent.Err() != nil {
			return g.total, time.Time{}, nil, g.parent.Err()
		}
		return g.total, time.Time{}, nil, g.err
	}
	return g.total, g.end, &g.lat, nil
}

// stop stops the drainers early, when the publisher failed.
func (g *drainers) stop() {
	g.cancel()
	g.wg.Wait()
}
