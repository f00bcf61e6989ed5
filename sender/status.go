package sender

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is where a link is.
type State string

// The states of a link.
const (
	StateConnecting State = "connecting"
	StateConnected  State = "connected"
	StateBackingOff State = "backing off"
	StateStopped    State = "stopped"
)

// Status is a link's state at one moment.
type Status struct {
	Queue       string    `json:"queue"`
	Destination string    `json:"destination"`
	NextHop     string    `json:"next_hop"`
	Addr        string    `json:"addr,omitempty"`
	State       State     `json:"state"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	InFlight    int64     `json:"in_flight"`
	// InFlightBytes are the encoded bytes of those messages, bounded by
	// Config.WindowBytes (and one message).
	InFlightBytes int64     `json:"in_flight_bytes"`
	Sent          int64     `json:"sent"`
	Acked         int64     `json:"acked"`
	Refused       int64     `json:"refused"`
	Reconnects    int64     `json:"reconnects"`
	Depth         int64     `json:"depth"`
	LastAck       time.Time `json:"last_ack,omitzero"`
	// Stalled is set when the window has been full for a while with no
	// ack: the next hop is alive (heartbeats) but not committing.
	Stalled bool `json:"stalled"`
	// Files is what the link does with files.
	Files FileStats `json:"files"`
}

type status struct {
	mu        sync.Mutex
	state     State
	hop       string
	lastErr   string
	lastErrAt time.Time
	lastAck   time.Time
	fullSince time.Time
	addr      atomic.Value // string
	inFlight  atomic.Int64
	// inFlightBytes sums every session's flight bytes of the link.
	inFlightBytes atomic.Int64
	sent, acked   atomic.Int64
	refused       atomic.Int64
	reconnects    atomic.Int64
}

func (st *status) set(state State, err error, hop string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.state = state
	if hop != "" {
		st.hop = hop
	}
	if err != nil {
		st.lastErr = err.Error()
		st.lastErrAt = time.Now()
	}
}

// hopName is the next hop of the last session, "" before the first.
func (st *status) hopName() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hop
}

func (st *status) windowFull(now time.Time) {
	st.mu.Lock()
	if st.fullSince.IsZero() {
		st.fullSince = now
	}
	st.mu.Unlock()
}

func (st *status) ackedAt(now time.Time) {
	st.mu.Lock()
	st.lastAck = now
	st.fullSince = time.Time{}
	st.mu.Unlock()
}

// Status returns the link's state.
func (s *Sender) Status() Status {
	st := &s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	addr, _ := st.addr.Load().(string)
	state := st.state
	if state == "" {
		state = StateConnecting
	}
	return Status{
		Queue: s.q.Name(), Destination: s.dest, NextHop: st.hop, Addr: addr,
		State: state, LastError: st.lastErr, LastErrorAt: st.lastErrAt,
		InFlight: st.inFlight.Load(), InFlightBytes: st.inFlightBytes.Load(), Sent: st.sent.Load(), Acked: st.acked.Load(),
		Refused: st.refused.Load(), Reconnects: st.reconnects.Load(),
		Depth: s.q.Stats().Depth, LastAck: st.lastAck,
		Stalled: !st.fullSince.IsZero() && s.cfg.Now().Sub(st.fullSince) > s.cfg.StallAfter,
		Files:   s.fileStats(),
	}
}
