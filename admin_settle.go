package petrel

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/queue"
)

// POST /api/recv and /api/subscribe with settle "later" write their
// messages and leave them leased, under a lease the answer names; POST
// /api/settle settles them. A client that settles only once it has the
// messages safe (petrel recv, once it has printed them) loses none when it
// is killed in between: the answer was written, but nothing was acked, and
// the queue delivers the messages again when their lease_timeout passes,
// as it does for any consumer that goes away. An ack that the node made
// as it wrote the answer could not give that.
//
// The node keeps each answer's deliveries until they are settled or their
// lease_timeout passes. maxAdminLeases bounds how many answers wait so:
// past it a request for settle "later" is refused (503) before it takes
// anything, counted in petrel_admin_leases_refused_total; the gauge
// petrel_admin_leases shows how many wait.

// maxAdminLeases bounds the answers that wait for POST /api/settle. Each
// holds at most maxRecv deliveries, whose bytes the queue holds anyway.
// A variable so that tests can lower it.
var maxAdminLeases = 1024

// errTooManyLeases refuses a request for settle "later" past maxAdminLeases.
var errTooManyLeases = errors.New("too many answers wait for POST /api/settle")

// errLeaseUnknown answers POST /api/settle for a lease the node does not
// hold: settled already, expired, or never given.
var errLeaseUnknown = errors.New("unknown lease")

// adminLeases are the answers that wait to be settled.
type adminLeases struct {
	mu       sync.Mutex
	held     map[string]*adminLease
	reserved int // slots taken by requests that have not answered yet
	closed   bool
	gauge    prometheus.Gauge
	refused  prometheus.Counter
}

// adminLease is the deliveries of one answer.
type adminLease struct {
	ts    []taken
	timer *time.Timer
}

func newAdminLeases(reg *prometheus.Registry) *adminLeases {
	l := &adminLeases{
		held: map[string]*adminLease{},
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "petrel_admin_leases",
			Help: "Answers of POST /api/recv and /api/subscribe whose messages wait, leased, for POST /api/settle.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "petrel_admin_leases_refused_total",
			Help: "Requests for settle \"later\" refused because as many answers as the bound already waited for POST /api/settle.",
		}),
	}
	reg.MustRegister(l.gauge, l.refused)
	return l
}

// reserve takes a slot for an answer to come; release it with unreserve,
// or turn it into a lease with hold.
func (l *adminLeases) reserve() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("admin API: %w", ErrClosed)
	}
	if len(l.held)+l.reserved >= maxAdminLeases {
		l.refused.Inc()
		return fmt.Errorf("%w (%d): settle those first, or let their lease_timeout pass", errTooManyLeases, maxAdminLeases)
	}
	l.reserved++
	return nil
}

func (l *adminLeases) unreserve() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved--
}

// hold turns a reserved slot into the lease of ts, which expires at
// expires, and returns its name.
func (l *adminLeases) hold(ts []taken, expires time.Time) string {
	var b [16]byte
	rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved--
	if l.closed {
		return name // the node stops: the messages come back at its next start
	}
	// The queue takes the messages back by itself when their lease
	// passes; the node only forgets the name.
	a := &adminLease{ts: ts}
	a.timer = time.AfterFunc(time.Until(expires), func() { l.take(name) })
	l.held[name] = a
	l.gauge.Set(float64(len(l.held)))
	return name
}

// take removes and returns the deliveries of lease name.
func (l *adminLeases) take(name string) ([]taken, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.held[name]
	if !ok {
		return nil, false
	}
	a.timer.Stop()
	delete(l.held, name)
	l.gauge.Set(float64(len(l.held)))
	return a.ts, true
}

// close forgets every lease: the node stops, and its queues with it.
func (l *adminLeases) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for name, a := range l.held {
		a.timer.Stop()
		delete(l.held, name)
	}
	l.gauge.Set(0)
}

// leaseExpiry is when the lease of the first of ts, the earliest, passes:
// a little after the queue's own deadline, which was set as it was taken.
// A settle between the two finds the lease lost, and says so.
func leaseExpiry(ts []taken) time.Time {
	return ts[0].at.Add(ts[0].d.Queue().Policy().LeaseTimeout)
}

func (s *adminServer) handleSettle(w http.ResponseWriter, r *http.Request) {
	var req adminapi.SettleRequest
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if req.Settle == "" {
		req.Settle = adminapi.SettleAck
	}
	switch {
	case req.Lease == "":
		writeAPIError(w, fmt.Errorf("no lease: %w", errBadRequest))
		return
	case req.Settle != adminapi.SettleAck && req.Settle != adminapi.SettleRelease && req.Settle != adminapi.SettleNack:
		writeAPIError(w, fmt.Errorf("settle %q: want %s, %s or %s: %w", req.Settle,
			adminapi.SettleAck, adminapi.SettleRelease, adminapi.SettleNack, errBadRequest))
		return
	}
	ts, ok := s.leases.take(req.Lease)
	if !ok {
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf("lease %q: %v: settled already, or its lease_timeout passed and its messages are delivered again", req.Lease, errLeaseUnknown))
		return
	}
	if req.Settle == adminapi.SettleNack && req.Reason == "" {
		req.Reason = "nacked through the admin API"
	}
	err := settleAll(ts, req.Settle, req.Reason)
	if err == nil {
		err = s.node.Sync(r.Context())
	}
	switch {
	case errors.Is(err, queue.ErrLeaseLost):
		writeJSONError(w, http.StatusConflict, fmt.Sprintf("settle (%s) lease %q: %v: the lease_timeout of some of its messages passed, and they are delivered again", req.Settle, req.Lease, err))
	case err != nil:
		writeAPIError(w, fmt.Errorf("settle (%s) lease %q: %w; its messages may be delivered again", req.Settle, req.Lease, err))
	default:
		writeJSON(w, adminapi.SettleResponse{Settled: req.Settle, Count: len(ts)})
	}
}
