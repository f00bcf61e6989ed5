package receiver

import "sync/atomic"

// Defaults of the bounds on the bytes clients' subscriptions hold leased.
const (
	// DefaultMaxSubscriptionHeld bounds the bytes of the messages one
	// client subscription holds leased and not yet settled.
	DefaultMaxSubscriptionHeld = 8 << 20
	// DefaultMaxHeld bounds them for every client subscription together.
	DefaultMaxHeld = 256 << 20
)

// heldCounts are the bytes the clients' subscriptions hold leased, all
// together, and the times a subscription waited at a bound in bytes.
type heldCounts struct {
	bytes atomic.Int64
	waits atomic.Int64
}

// HeldStats are the client subscriptions' leases at work.
type HeldStats struct {
	// Bytes is the sum of the sizes of the messages leased to clients'
	// subscriptions and not yet settled, forgotten or released.
	Bytes int64
	// Waits counts the times a subscription stopped delivering because it,
	// or all of them together, held MaxSubscriptionHeld or MaxHeld bytes.
	Waits int64
	// MaxSubscription and Max are the bounds.
	MaxSubscription, Max int64
}

// HeldStats returns the bytes clients' subscriptions hold leased now, and
// how often one waited at the bounds since the server started.
func (s *Server) HeldStats() HeldStats {
	return HeldStats{
		Bytes: s.held.bytes.Load(), Waits: s.held.waits.Load(),
		MaxSubscription: s.maxSubscriptionHeld(), Max: s.maxHeld(),
	}
}

func (s *Server) maxSubscriptionHeld() int64 {
	if s.cfg.MaxSubscriptionHeld > 0 {
		return s.cfg.MaxSubscriptionHeld
	}
	return DefaultMaxSubscriptionHeld
}

func (s *Server) maxHeld() int64 {
	if s.cfg.MaxHeld > 0 {
		return s.cfg.MaxHeld
	}
	return DefaultMaxHeld
}
