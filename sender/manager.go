package sender

import (
	"context"
	"log/slog"
	"sort"
	"sync"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
	"go.uber.org/fx"
)

// Manager owns the pool and one Sender per send queue.
type Manager struct {
	cfg  Config
	pool *Pool
	hop  NextHop

	mu      sync.Mutex
	senders map[*queue.Queue]*Sender
	stopped bool
}

// NewManager makes a manager whose senders dial through a pool built from
// sc and dir, and route with hop.
func NewManager(cfg Config, sc session.Config, dir *address.Directory, hop NextHop) *Manager {
	cfg = cfg.withDefaults()
	return &Manager{
		cfg:     cfg,
		pool:    NewPool(sc, dir, cfg.Logger.With(slog.String(logkey.Component, "pool"))).withTLS(cfg.TLS).withBackoff(cfg.ReconnectMin, cfg.ReconnectMax),
		hop:     hop,
		senders: map[*queue.Queue]*Sender{},
	}
}

// Ensure starts a sender for q, whose messages go to node dest, unless one
// runs already.
func (m *Manager) Ensure(q *queue.Queue, dest string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || m.senders[q] != nil {
		return
	}
	s := New(m.cfg, q, dest, m.hop, m.pool)
	m.senders[q] = s
	s.Start()
}

// Remove stops the sender of q, if one runs, and reports how many
// senders toward its node remain. The node calls it before it drops a
// send queue it no longer needs (a discovered node that left the
// directory), so that no goroutine keeps dialling for a queue that is
// gone.
func (m *Manager) Remove(q *queue.Queue, dest string) (left int) {
	m.mu.Lock()
	s := m.senders[q]
	delete(m.senders, q)
	for _, o := range m.senders {
		if o.dest == dest {
			left++
		}
	}
	m.mu.Unlock()
	if s != nil {
		s.Stop()
	}
	return left
}

// Rehop makes every sender whose next hop changed (routes or neighbours
// were reconfigured) reconnect through the new one. Senders whose hop is
// the same keep their sessions; those that wait for a route look again.
func (m *Manager) Rehop() {
	m.pool.rehop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.senders {
		if st := s.Status(); st.State == StateConnected && st.NextHop != s.hopNow() {
			s.Reconnect()
		}
	}
}

// Pool returns the connection pool.
func (m *Manager) Pool() *Pool { return m.pool }

// Statuses returns every link's status, sorted by queue.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	ss := make([]*Sender, 0, len(m.senders))
	for _, s := range m.senders {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	out := make([]Status, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// Stop stops every sender, then closes the pool's connections.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	ss := m.senders
	m.senders = map[*queue.Queue]*Sender{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(s.Stop)
	}
	wg.Wait()
	m.pool.Close()
}

// Module provides nothing by itself: the node builds its Manager, because
// the next-hop function is the node's. It registers the manager's stop
// with the lifecycle.
var Module = fx.Module("sender",
	fx.Invoke(func(lc fx.Lifecycle, m *Manager) {
		lc.Append(fx.StopHook(func(context.Context) error { m.Stop(); return nil }))
	}),
)
