package petrel

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/petrelmq/petrel/internal/authlimit"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/prometheus/client_golang/prometheus"
)

// The admin token can be guessed over the TCP listener: with the bearer
// header of any API request, the console's session cookie, or its login
// form. Each remote address may fail a few checks (authlimit.DefaultBurst),
// then one more every authlimit.DefaultEvery; past that, a request of it
// that carries a secret to check is refused with 429 and Retry-After,
// before the secret is looked at, and counted as
// petrel_admin_refused_total{reason="rate_limit"}. The right token is
// refused too while the address is locked out: else the lock would stop
// nothing. Requests that carry no secret (probes, unauthenticated scrapes,
// the login form itself, the console's static files) pass as before.

// refusedRate is the reason of petrel_admin_refused_total for a 429.
const refusedRate = "rate_limit"

// newAuthLimiter is the admin server's limiter of failed token checks, with
// its gauge of the addresses it counts, registered in reg.
func newAuthLimiter(reg *prometheus.Registry) *authlimit.Limiter {
	l := &authlimit.Limiter{}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "petrel_admin_auth_failing_addresses",
		Help: "Remote addresses whose failed admin token checks are counted, for the rate limit of guesses (at most 4096; past that they share one count).",
	}, func() float64 { return float64(l.Len()) }))
	return l
}

// checksSecret reports whether r carries a secret the guard or the
// console will check: the bearer token or the session cookie on a path
// that needs them, or the login form's token.
func (g *adminGuard) checksSecret(r *http.Request) bool {
	if !g.hasToken || g.limiter == nil {
		return false
	}
	if g.console != nil && console.IsConsolePath(r.URL.Path) {
		if r.URL.Path == "/login" {
			return r.Method == http.MethodPost
		}
		return !strings.HasPrefix(r.URL.Path, "/static/") && console.CarriesSession(r)
	}
	return g.needsToken(r) && (r.Header.Get("Authorization") != "" || g.console != nil && console.CarriesSession(r))
}

// withinRate answers 429 when r's address may not have its secret checked
// now.
func (g *adminGuard) withinRate(w http.ResponseWriter, r *http.Request) bool {
	wait, ok := g.limiter.Allow(r.RemoteAddr)
	if ok {
		return true
	}
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	g.refused.WithLabelValues(refusedRate).Inc()
	msg := "too many wrong admin tokens from your address: try again in " + strconv.Itoa(secs) + " s"
	if g.console != nil && console.IsConsolePath(r.URL.Path) {
		g.console.RefuseLimited(w, r, msg)
		return false
	}
	writeJSONError(w, http.StatusTooManyRequests, msg)
	return false
}

// serveChecked serves r, whose secret is checked past the guard (by the
// console: its pages' cookie, its login form's token), and counts a
// wrong one.
func (g *adminGuard) serveChecked(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/login" {
		rec := &statusRecorder{ResponseWriter: w}
		g.next.ServeHTTP(rec, r)
		if rec.code == http.StatusUnauthorized {
			g.limiter.Fail(r.RemoteAddr)
		}
		return
	}
	if !g.console.Session(r) {
		g.limiter.Fail(r.RemoteAddr)
	}
	g.next.ServeHTTP(w, r)
}

// statusRecorder notes the status a handler answers.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
