package petrel

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrelmq/petrel/internal/acceptretry"
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
// themselves; a WriteTimeout would cut them all. Each write of a stream
// has a deadline of its own instead (internal/console/streams.go). There is no ReadTimeout
// either: it bounds the reading of the header and the body together, and
// the body of POST /api/send may be as large as message.Limits.MaxBody
// allows (tens of MiB as JSON), which a slow link takes minutes to carry.
// The connection bound caps what slow or long requests can hold, and a
// body has a bound of its own, by rate rather than by duration (see
// bodyDeadline).
//
// The unix socket gets the idle timeout but no bound: only the node's
// user reaches it, and it stays the way in when the TCP listener is full.
//
// The TCP listener accepts through acceptretry: an Accept error that
// passes (EMFILE, out of file descriptors, and the like) is retried after
// a wait that doubles from 5 ms up to 1 s, counted, and logged at most
// once every adminConnLogEvery. net/http retries some of them itself, but
// not ENOBUFS or ENOMEM, after which it stopped serving, and it logged
// each retry through the standard logger.

// adminHeaderTimeout bounds the wait for a request's header, the first
// request's included: a connection that sends nothing is closed after it.
const adminHeaderTimeout = 5 * time.Second

// adminMaxHeaderBytes bounds a request's header, read before the token is
// checked: net/http's default of 1 MiB on each of the admin connections
// let anyone who reaches the port make the node hold a quarter of a GB.
// The API and the console send a few hundred bytes; 64 KiB leaves room
// for the cookies a browser sends to a host shared with other sites. A
// larger header is answered 431.
const adminMaxHeaderBytes = 64 << 10

// adminBodyTime and adminBodyMinRate bound the reading of a request's
// body: all of it must have arrived adminBodyTime after the header, plus
// the time adminBodyMinRate takes to carry what arrived. A body as large
// as POST /api/send takes may come over a slow link, so the bound grows
// with what arrives; one that stops, or trickles, is cut. Variables so
// that tests can shorten them.
var (
	adminBodyTime    = 30 * time.Second
	adminBodyMinRate = 1024.0 // bytes per second
)

// bodyDeadline bounds the reading of each request's body (see
// adminBodyTime). Without it a request that announced a body and never
// sent it held its connection for ever: net/http reads up to 256 KiB of
// a body the handler left unread, a refused one included, before it
// answers, with no deadline, and 256 such requests, no token needed, shut
// out the console, the metrics and the CLI. Once the body is read the
// deadline is not moved again, so that a request that then waits (POST
// /api/recv --wait, /api/subscribe) is not cut: net/http lifts it as it
// starts the read that notices a client going away.
func bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		start := time.Now()
		if err := rc.SetReadDeadline(start.Add(adminBodyTime)); err != nil {
			h.ServeHTTP(w, r) // not a connection of net/http's: nothing to bound
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, start: start}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody moves its connection's read deadline on as its body
// arrives, and lifts it at the body's end.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	read  int64
	done  bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	b.read += int64(n)
	if err != nil {
		// At the body's end net/http lifts the deadline itself, as it
		// starts the read that notices a client going away; after a
		// deadline struck, the connection goes.
		b.done = true
		return n, err
	}
	b.rc.SetReadDeadline(b.start.Add(adminBodyTime + time.Duration(float64(b.read)/adminBodyMinRate*float64(time.Second))))
	return n, err
}

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
	// acceptErrors counts the Accept errors retried.
	acceptErrors prometheus.Counter
	log          *slog.Logger
	logs         ratelog.Limiter
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
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "petrel_admin_accept_errors_total",
			Help: "Errors accepting connections on the admin TCP listener, retried after a wait (EMFILE: out of file descriptors, and the like).",
		}),
		log:  log,
		logs: ratelog.Limiter{Every: adminConnLogEvery},
	}
	reg.MustRegister(l.refused, l.acceptErrors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "petrel_admin_connections_open",
		Help: "Connections open on the admin TCP listener (at most 256).",
	}, func() float64 { return float64(l.open.Load()) }))
	return l
}

// listener wraps ln, the admin TCP listener, in the bound, over the
// retry of Accept errors that pass.
func (l *adminConnLimit) listener(ln net.Listener) net.Listener {
	return &adminLimitedListener{Listener: acceptretry.New(ln, l.acceptRetried), limit: l}
}

// acceptRetried counts, and logs now and then, an Accept error retried.
func (l *adminConnLimit) acceptRetried(err error, wait time.Duration) {
	l.acceptErrors.Inc()
	if held, ok := l.logs.Allow("accept"); ok {
		l.log.Warn("admin accept failed; retrying", slog.Any(logkey.Error, err),
			slog.Duration("retry_in", wait), slog.Int64("suppressed", held))
	}
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
