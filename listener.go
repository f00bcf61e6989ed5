package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// Handler handles one delivered message. Returning nil acks it; an error
// nacks it with the error as the reason. A panic is recovered and counted
// as a nack.
type Handler func(ctx context.Context, d *Delivery) error

// ListenOptions tune Listen.
type ListenOptions struct {
	// Concurrency is how many messages are handled at once (default 1).
	// With more than 1, order across messages is not kept.
	Concurrency int
}

// Listener runs a Handler over a consumer's messages until stopped.
type Listener struct {
	c      *Consumer
	host   listenerHost // stops the listener when it closes
	h      Handler
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	handled atomic.Int64
	failed  atomic.Int64
	panics  atomic.Int64
}

// Listen starts calling h for each message of the consumer, with
// opts.Concurrency goroutines. It returns at once. The listener stops when
// Stop is called, or the consumer or its endpoint closes; on a consumer
// closed already, Listen returns an error wrapping ErrClosed.
func (c *Consumer) Listen(h Handler, opts ListenOptions) (*Listener, error) {
	if h == nil {
		return nil, errors.New("listen: nil handler")
	}
	if err := c.b.closed(); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{c: c, host: c.b.host(), h: h, cancel: cancel}
	if err := l.host.track(l); err != nil {
		cancel()
		return nil, err
	}
	l.wg.Add(opts.Concurrency)
	for range opts.Concurrency {
		go l.messagePump(ctx)
	}
	return l, nil
}

// Stop stops the listener and waits for handlers in progress to return.
// Their messages are acked or nacked as usual.
func (l *Listener) Stop() {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
		l.host.untrack(l)
	})
}

// Counts returns how many messages were handled successfully, failed
// (nacked by error or panic), and of those, how many panicked.
func (l *Listener) Counts() (handled, failed, panics int64) {
	return l.handled.Load(), l.failed.Load(), l.panics.Load()
}

// messagePump receives and handles messages until ctx ends.
func (l *Listener) messagePump(ctx context.Context) {
	defer l.wg.Done()
	for {
		d, err := l.c.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			l.host.logger().Warn("listener receive failed", slog.String(logkey.Address, l.c.addr), slog.Any(logkey.Error, err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		l.handle(ctx, d)
	}
}

func (l *Listener) handle(ctx context.Context, d *Delivery) {
	err := l.call(ctx, d)
	var settle error
	if err == nil {
		l.handled.Add(1)
		settle = d.Ack()
	} else {
		l.failed.Add(1)
		settle = d.Nack(err.Error())
	}
	if settle != nil && !errors.Is(settle, ErrClosed) {
		l.host.logger().Warn("listener settle failed", slog.String(logkey.Address, l.c.addr), slog.Any(logkey.Error, settle))
	}
}

// call runs the handler, turning a panic into an error.
func (l *Listener) call(ctx context.Context, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			l.panics.Add(1)
			err = fmt.Errorf("handler panic: %v", r)
			l.host.logger().Error("handler panicked", slog.String(logkey.Address, l.c.addr), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	return l.h(ctx, d)
}
