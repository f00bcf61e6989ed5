package bench

import (
	"context"
	"errors"
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

// waiter is a send in flight: a Petrel Pending, a NATS PubAckFuture.
type waiter interface {
	Wait(ctx context.Context) error
}

// inflight is one send a producer waits on.
type inflight[W waiter] struct {
	w  W
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

// produce is one producer: it sends count messages through windowed.
func produce(ctx context.Context, p *petrel.Producer, dest string, count, window int, body []byte, record bool) (*sendResult, error) {
	return windowed(ctx, count, window, record, func(at time.Time) (*petrel.Pending, error) {
		m := p.CreateDataMessage(dest)
		m.Data.DataType = "bench"
		m.Body = body // shared and never written: encoded at submit
		m.Timestamp = at
		return p.SendAsync(m), nil
	})
}

// windowed submits count sends, holding a window slot for each, while
// its completer goroutine waits on them in submission order and times
// them (record). Waiting in a goroutine of its own means a completion is
// seen when it happens, not when the producer next finds time to look; a
// store or stream takes one producer's sends in order, so waiting in
// order costs no accuracy. A failed submit or send stops the submissions
// at once.
func windowed[W waiter](ctx context.Context, count, window int, record bool, submit func(at time.Time) (W, error)) (*sendResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, window)
	pending := make(chan inflight[W], window)
	res := &sendResult{}
	if record {
		res.lat = make(latencies, 0, count)
	}
	var werr, serr error // the completer's, the submitter's
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range pending {
			if err := f.w.Wait(ctx); err != nil && werr == nil {
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
		at := time.Now()
		w, err := submit(at)
		if err != nil {
			serr = err
			cancel()
			break
		}
		pending <- inflight[W]{w: w, at: at}
	}
	close(pending)
	<-done
	if err := errors.Join(serr, werr); err != nil {
		return nil, err
	}
	return res, ctx.Err()
}

// flowFigures are a publish-then-consume run's figures, as bench client
// and its NATS run report them: messages over the publish and the
// consume durations, and the publish latency over every publish.
type flowFigures struct {
	PublishMsgsPerSec float64 `json:"publish_msgs_per_sec"`
	ConsumeMsgsPerSec float64 `json:"consume_msgs_per_sec"`
	PublishSeconds    float64 `json:"publish_seconds"`
	ConsumeSeconds    float64 `json:"consume_seconds"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
}

// setPublish sets the publish figures of n messages published in d with
// latencies lat.
func (f *flowFigures) setPublish(n int, d time.Duration, lat latencies) {
	pct := lat.percentiles(50, 99, 100)
	f.PublishMsgsPerSec = round(rate(int64(n), d), 2)
	f.PublishSeconds = round(d.Seconds(), 3)
	f.P50ms, f.P99ms, f.MaxMs = round(ms(pct[0]), 3), round(ms(pct[1]), 3), round(ms(pct[2]), 3)
}

// setConsume sets the consume figures of n messages consumed in d.
func (f *flowFigures) setConsume(n int, d time.Duration) {
	f.ConsumeMsgsPerSec = round(rate(int64(n), d), 2)
	f.ConsumeSeconds = round(d.Seconds(), 3)
}
