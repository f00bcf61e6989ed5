package audit

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
)

// The keys of the audit lines.
const (
	KeyEvent       = "event" // publish, deliver, ack or nack
	KeyID          = "id"
	KeyOrigin      = "origin"
	KeyDestination = "destination"
	KeyAddress     = "address"
	KeyIdentity    = "identity"
	KeyKind        = "identity_kind"
	KeyRemote      = "remote"
	KeyPath        = "path"
	KeyReason      = "reason"
)

// Options configure an Interceptor. The zero value logs every event at
// Info.
type Options struct {
	// EveryN logs one event in N of each kind (publish, deliver, ack),
	// the first included; 0 and 1 log every event.
	EveryN int
	// Level is the lines' level (default slog.LevelInfo).
	Level slog.Level
}

// Interceptor writes the audit lines. It never refuses anything. Safe for
// concurrent use, as every Interceptor must be.
type Interceptor struct {
	petrel.NopInterceptor
	log   *slog.Logger
	opts  Options
	count [3]atomic.Uint64 // per event kind, for sampling
}

var _ petrel.Interceptor = (*Interceptor)(nil)

const (
	kindPublish = iota
	kindDeliver
	kindAck
)

// New returns an Interceptor that writes to log (slog.Default() when
// nil). Register it in petrel.Config.Interceptors, or in the fx value
// group "petrel.interceptors".
func New(log *slog.Logger, opts Options) *Interceptor {
	if log == nil {
		log = slog.Default()
	}
	return &Interceptor{log: log.With(slog.String("component", "audit")), opts: opts}
}

// sampled reports whether this event of kind is logged, counting it.
func (a *Interceptor) sampled(ctx context.Context, kind int) bool {
	n := a.count[kind].Add(1)
	if a.opts.EveryN > 1 && (n-1)%uint64(a.opts.EveryN) != 0 {
		return false
	}
	return a.log.Enabled(ctx, a.opts.Level)
}

// OnPublish logs a message entering the node.
func (a *Interceptor) OnPublish(ctx context.Context, m *message.Message, from petrel.ConnInfo) error {
	if a.sampled(ctx, kindPublish) {
		a.line(ctx, "publish", m, from)
	}
	return nil
}

// OnDeliver logs a message handed to a consumer.
func (a *Interceptor) OnDeliver(ctx context.Context, m *message.Message, to petrel.ConnInfo) {
	if a.sampled(ctx, kindDeliver) {
		a.line(ctx, "deliver", m, to)
	}
}

// OnAck logs an ack or a nack.
func (a *Interceptor) OnAck(ack petrel.AckInfo) {
	ctx := context.Background()
	if !a.sampled(ctx, kindAck) {
		return
	}
	event := "ack"
	if ack.Nack {
		event = "nack"
	}
	attrs := append(connAttrs(ack.Conn),
		slog.String(KeyEvent, event), slog.Uint64(KeyID, ack.ID), slog.String(KeyOrigin, ack.Origin.String()),
		slog.String(KeyAddress, ack.Address))
	if ack.Reason != "" {
		attrs = append(attrs, slog.String(KeyReason, ack.Reason))
	}
	a.log.LogAttrs(ctx, a.opts.Level, "audit "+event, attrs...)
}

func (a *Interceptor) line(ctx context.Context, event string, m *message.Message, c petrel.ConnInfo) {
	attrs := append(connAttrs(c),
		slog.String(KeyEvent, event), slog.Uint64(KeyID, m.ID), slog.String(KeyOrigin, m.Origin.String()),
		slog.String(KeyDestination, m.Destination))
	a.log.LogAttrs(ctx, a.opts.Level, "audit "+event, attrs...)
}

func connAttrs(c petrel.ConnInfo) []slog.Attr {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String(KeyIdentity, c.Identity), slog.String(KeyPath, c.Path.String()))
	if c.Kind != "" {
		attrs = append(attrs, slog.String(KeyKind, string(c.Kind)))
	}
	if c.Remote != "" {
		attrs = append(attrs, slog.String(KeyRemote, c.Remote))
	}
	return attrs
}
