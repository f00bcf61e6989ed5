package bench

import (
	"context"
	"sync"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// sendResult is what the producers of a bench measured.
type sendResult struct {
	// last is when the last send became durable, as seen by its producer.
	last time.Time
	// lat holds every send's latency, submit -> durable, when recorded.
	lat latencies
}

// inflight is one send a producer waits on.
type inflight struct {
	pd *petrel.Pending
	at time.Time
}

// sendAll sends n messages with body to Addr from producers
// goroutines, each keeping up to window sends in flight with SendAsync. The
// first failed send stops them all and is returned.
func sendAll(ctx context.Context, p *petrel.Producer, n, producers, window int, body []byte, record bool) (*sendResult, error) {
	return sendAllTo(ctx, p, Addr, n, producers, window, body, record)
}

// sendAllTo is sendAll to dest. Each message's Timestamp is the moment it
// was submitted, so that a consumer can time publish -> delivery.
func sendAllTo(ctx context.Context, p *petrel.Producer, dest string, n, producers, window int, body []byte, record bool) (*sendResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		res     = &sendResult{}
		errOnce sync.Once
		first   error
	)
	wg.Add(producers)
	for i := range producers {
		count := n / producers
		if i < n%producers {
			count++
		}
		go func() {
			defer wg.Done()
			r, err := produce(ctx, p, dest, count, window, body, record)
			if err != nil {
				errOnce.Do(func() { first = err })
				cancel()
				return
			}
			mu.Lock()
			res.lat = append(res.lat, r.lat...)
			if r.last.After(res.last) {
				res.last = r.last
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return res, ctx.Err()
}

// produce is one producer: it submits count messages, holding a window
// slot for each, while its completer goroutine waits on the handles in
// submission order and times them. Waiting in a goroutine of its own means
// a completion is seen when it happens, not when the producer next finds
// time to look; the store commits one producer's sends in order, so waiting
// in order costs no accuracy.
func produce(ctx context.Context, p *petrel.Producer, dest string, count, window int, body []byte, record bool) (*sendResult, error) {
	// A failed send stops this producer's submissions at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, window)
	pending := make(chan inflight, window)
	res := &sendResult{}
	if record {
		res.lat = make(latencies, 0, count)
	}
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range pending {
			if err := f.pd.Wait(ctx); err != nil && werr == nil {
				werr = err
				cancel()
			}
			res.last = time.Now()
			if record {
				res.lat = append(res.lat, res.last.Sub(f.at))
			}
			<-slots
		}
	}()
submit:
	for range count {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break submit
		}
		m := p.CreateDataMessage(dest)
		m.Data.DataType = "bench"
		m.Body = body // shared and never written: encoded at submit
		at := time.Now()
		m.Timestamp = at
		pending <- inflight{pd: p.SendAsync(m), at: at}
	}
	close(pending)
	<-done
	if werr != nil {
		return nil, werr
	}
	return res, ctx.Err()
}
