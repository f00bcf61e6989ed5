package petrel

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/ratelog"
)

// Anyone who reaches the admin TCP listener can open connections to it,
// token or not: the guard only sees requests. Two bounds keep what they
// cost finite.
//
//   - adminIdleTimeout closes a keep-alive connection that waits that long
//     for its next request. Without it net/http falls back to ReadTimeout,
//     which is not set (see below), and a client that asked for /healthz
//     once could hold its connection, a goroutine and its buffers, for ever.
//   - maxAdminConns bounds the connections open at once. The one past it is
//     closed as soon as it is accepted, before net/http starts a goroutine
//     for it, counted, and logged at most once every adminConnLogEvery.
//
// The request header has its own bound, adminHeaderTimeout. There is no
// WriteTimeout: it runs from the start of a request to its end, and
// POST /api/recv and /api/subscribe rightly wait as long as the client
// asks, and the console's event streams (GET /events) never end by
// themselves; a WriteTimeout would cut them all. There is no ReadTimeout
// either: it bounds the reading of the header and the body together, and
// the body of POST /api/send may be as large as message.Limits.MaxBody
// allows (tens of MiB as JSON), which a slow link takes minutes to carry.
// The connection bound caps what slow or long requests can hold.
//
// The unix socket gets the idle timeout but no bound: only the node's
// user reaches it, and it stays the way in when the TCP listener is full.

// adminHeaderTimeout bounds the wait for a request's header, the first
// request's included: a connection that sends nothing is closed after it.
const adminHeaderTimeout = 5 * time.Second

// adminIdleTimeout is how long an admin connection may stay open between
// two requests. Two minutes is longer than Go's HTTP client (`petrel`,
// Prometheus) keeps an idle connection for reuse (90 s) and than the usual
// scrape interval, so those rarely find their connection closed; a client
// that does sends its request again on a new one, as HTTP clients do for a
// kept-alive connection closed under them. An abandoned connection is
// still freed within minutes. A variable so that tests can shorten it.
var adminIdleTimeout = 2 * time.Minute

// maxAdminConns bounds the connections open at once on the admin TCP
// listener. Operators, scrapers and consoles need a few each (a browser
// opens six per host); 256 leaves room for all of them, and bounds the
// goroutines and buffers a flood can make the node hold to a few MiB.
const maxAdminConns = 256

// adminConnLogEvery is how often, at most, the refused connections are
// logged, with the count of those not logged.
const adminConnLogEvery = 10 * time.Second

// adminConnLimit counts the connections open on the admin TCP listener,
// and those refused past maxAdminConns.
type adminConnLimit struct {
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
	log     *slog.Logger
	logs    ratelog.Limiter
}

// newAdminConnLimit makes the bound of the admin TCP listener, and
// registers its metrics in reg.
func newAdminConnLimit(reg *prometheus.Registry, log *slog.Logger) *adminConnLimit {
	l := &adminConnLimit{
		max: maxAdminConns,
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "petrel_admin_connections_refused_total",
			Help: "Connections to the admin TCP listener closed as soon as accepted, past the bound of connections open at once (256).",
		}),
		log:  log,
		logs: ratelog.Limiter{Every: adminConnLogEvery},
	}
	reg.MustRegister(l.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "petrel_admin_connections_open",
		Help: "Connections open on the admin TCP listener (at most 256).",
	}, func() float64 { return float64(l.open.Load()) }))
	return l
}

// listener wraps ln, the admin TCP listener, in the bound.
func (l *adminConnLimit) listener(ln net.Listener) net.Listener {
	return &adminLimitedListener{Listener: ln, limit: l}
}

// adminLimitedListener closes, as soon as it accepts it, a connection
// past the bound, and accepts the next: net/http never sees it.
type adminLimitedListener struct {
	net.Listener
	limit *adminConnLimit
}

func (ln *adminLimitedListener) Accept() (net.Conn, error) {
	l := ln.limit
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &adminLimitedConn{Conn: c, limit: l}, nil
		}
		l.open.Add(-1)
		// Counted before the close, which the client sees.
		l.refused.Inc()
		c.Close()
		if held, ok := l.logs.Allow("connections"); ok {
			l.log.Warn("admin connection refused: too many open; close idle clients, or use the admin socket",
				slog.String(logkey.Addr, c.RemoteAddr().String()), slog.Int64("max_connections", l.max),
				slog.Int64("suppressed", held))
		}
	}
}

// adminLimitedConn gives its place back when it is closed, once
// whichever way it is closed.
type adminLimitedConn struct {
	net.Conn
	limit *adminConnLimit
	once  sync.Once
}

func (c *adminLimitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limit.open.Add(-1) })
	return err
}
