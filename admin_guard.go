package petrel

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/authlimit"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/prometheus/client_golang/prometheus"
)

// The admin API sends, takes and deletes messages, and sends files from
// the node's disk, so the TCP listener guards every request. A web page
// that a browser on the node's machine opens is the first threat: it can
// POST text/plain to loopback without a preflight, and, by DNS rebinding,
// read the answers under its own origin. adminGuard refuses, in order:
//
//	Host not the listener's own address, a loopback name on a loopback
//	   listener, or one of Admin.Hosts                              → 403
//	Origin present and not http(s) of an allowed Host              → 403
//	no or wrong "Authorization: Bearer <Admin.Token>", when a token
//	   is set (not asked of /healthz, /readyz, the console's pages,
//	   which ask for their own login, nor of /metrics unless
//	   Admin.MetricsAuth), and no console session cookie           → 401
//	a secret to check (bearer token, session cookie, login form) from
//	   an address past its failed checks (admin_guard_rate.go)     → 429
//	the console's session cookie on a POST without its CSRF token → 403
//	a POST whose Content-Type is not application/json, but for the
//	   console's login and logout forms                            → 415
//
// The unix socket gets only the Content-Type check (requireJSON): whoever
// reaches it is the node's user, since the data directory is 0700 and the
// socket 0600, and `petrel` talks to it with a fixed Host.

// The reasons of petrel_admin_refused_total.
const (
	refusedHost        = "host"
	refusedOrigin      = "origin"
	refusedToken       = "token"
	refusedContentType = "content_type"
	refusedFileRoot    = "file_root"
	refusedCSRF        = "csrf"
)

// newAdminRefused is the counter of admin requests refused, by reason.
func newAdminRefused() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petrel_admin_refused_total",
		Help: "Admin requests refused: bad Host, Origin, token, CSRF token or Content-Type, or a file outside admin.file_roots.",
	}, []string{"reason"})
}

// minAdminToken is the shortest token Validate accepts: 16 random
// characters are past guessing over a network.
const minAdminToken = 16

// adminGuard wraps the TCP listener's handler; see above.
type adminGuard struct {
	next        http.Handler
	hosts       hostSet
	token       [sha256.Size]byte // hashed, so the comparison takes the same time whatever the length
	hasToken    bool
	metricsAuth bool
	refused     *prometheus.CounterVec
	// console, when set, serves its pages behind its own login, and its
	// session cookie stands for the token with the CSRF token.
	console *console.Server
	// limiter bounds the failed token checks per remote address
	// (admin_guard_rate.go).
	limiter *authlimit.Limiter
}

func newAdminGuard(next http.Handler, cfg AdminConfig, bound net.Addr, refused *prometheus.CounterVec) *adminGuard {
	g := &adminGuard{
		next:        next,
		hosts:       allowedHosts(bound, cfg.Hosts),
		hasToken:    cfg.Token != "",
		metricsAuth: cfg.MetricsAuth,
		refused:     refused,
	}
	if g.hasToken {
		g.token = sha256.Sum256([]byte(cfg.Token))
	}
	return g
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secret := g.checksSecret(r)
	switch {
	case !g.hosts.allows(r.Host, "80"):
		g.refuse(w, refusedHost, http.StatusForbidden,
			fmt.Sprintf("host %q is not this admin listener's address: add it to admin.hosts if it names this node", r.Host))
	case !g.originAllowed(r.Header.Get("Origin")):
		g.refuse(w, refusedOrigin, http.StatusForbidden, "requests from web pages of other origins are refused")
	case secret && !g.withinRate(w, r):
		// withinRate answered 429.
	case !g.authorized(w, r):
		// authorized answered, and counted a wrong secret.
	case !jsonPOST(r) && !(g.console != nil && console.FormPath(r.URL.Path)):
		g.refuse(w, refusedContentType, http.StatusUnsupportedMediaType, errNotJSON)
	case secret && console.IsConsolePath(r.URL.Path):
		g.serveChecked(w, r)
	default:
		g.next.ServeHTTP(w, r)
	}
}

func (g *adminGuard) refuse(w http.ResponseWriter, reason string, code int, msg string) {
	g.refused.WithLabelValues(reason).Inc()
	writeJSONError(w, code, msg)
}

// authorized reports whether r may pass: it needs no token, carries it,
// or comes from a console session (with the CSRF token, if it changes
// anything). Otherwise it answers the refusal.
func (g *adminGuard) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !g.needsToken(r) {
		return g.consoleFormAllowed(w, r)
	}
	if g.tokenMatches(r.Header.Get("Authorization")) {
		return true
	}
	if g.console != nil && g.console.Session(r) {
		// The cookie goes with every request the browser makes to this
		// listener, whichever page asks: a change must also prove it
		// comes from a page of the console, which alone knows the token.
		if r.Method == http.MethodGet || r.Method == http.MethodHead || g.console.CSRFValid(r) {
			return true
		}
		g.refuse(w, refusedCSRF, http.StatusForbidden, "missing or wrong CSRF token: reload the console page")
		return false
	}
	if g.checksSecret(r) {
		g.limiter.Fail(r.RemoteAddr)
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="petrel admin"`)
	g.refuse(w, refusedToken, http.StatusUnauthorized,
		"missing or wrong bearer token: send Authorization: Bearer <the token of admin.token_file>")
	return false
}

// consoleFormAllowed refuses, counted as the API's, the console's one
// change that is not a JSON POST: a logout of a session without its CSRF
// token. The login has no session to prove yet, and a logout without a
// session is the console's own 401.
func (g *adminGuard) consoleFormAllowed(w http.ResponseWriter, r *http.Request) bool {
	if !g.hasToken || g.console == nil || r.Method != http.MethodPost || r.URL.Path != "/logout" || !g.console.Session(r) {
		return true
	}
	// The field is read from the form body, which a logout keeps small.
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if g.console.CSRFValid(r) {
		return true
	}
	g.refuse(w, refusedCSRF, http.StatusForbidden, "missing or wrong CSRF token: reload the console page")
	return false
}

// needsToken reports whether r must carry the token: probes and, unless
// MetricsAuth, scrapes do not, so that they need no secret.
func (g *adminGuard) needsToken(r *http.Request) bool {
	if !g.hasToken {
		return false
	}
	if g.console != nil && console.IsConsolePath(r.URL.Path) {
		return false
	}
	switch r.URL.Path {
	case adminapi.PathHealthz, adminapi.PathReadyz:
		return false
	case adminapi.PathMetrics:
		return g.metricsAuth
	}
	return true
}

func (g *adminGuard) tokenMatches(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// originAllowed reports whether a request's Origin, if any, is a page
// served from an allowed Host. Browsers send it on every cross-origin
// request and on POSTs; "null" (a sandboxed or file: page) is refused.
func (g *adminGuard) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
		return false
	}
	switch u.Scheme {
	case "http":
		return g.hosts.allows(u.Host, "80")
	case "https":
		return g.hosts.allows(u.Host, "443")
	}
	return false
}

// errNotJSON is the reason of a 415.
const errNotJSON = "POST bodies must be sent with Content-Type: application/json"

// jsonPOST reports whether r is not a POST, or a POST of JSON. Browsers
// send text/plain, form and multipart POSTs to any address without asking
// first; application/json needs a CORS preflight, which is never granted.
func jsonPOST(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// requireJSON is the socket's one check: the Content-Type of POSTs.
func requireJSON(next http.Handler, refused *prometheus.CounterVec) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !jsonPOST(r) {
			refused.WithLabelValues(refusedContentType).Inc()
			writeJSONError(w, http.StatusUnsupportedMediaType, errNotJSON)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostSet is what the Host header may say: exact host:port pairs, and
// names that are allowed on any port.
type hostSet struct {
	exact map[string]bool // "127.0.0.1:9090", "[::1]:9090", lowercased
	names map[string]bool // "petrel.example.com"
}

// allowedHosts is the listener's own address as bound (with the port it
// got when it asked for port 0), the loopback names on a loopback
// listener, every local interface address on a wildcard one, and names.
func allowedHosts(bound net.Addr, names []string) hostSet {
	s := hostSet{exact: map[string]bool{}, names: map[string]bool{}}
	host, port, _ := net.SplitHostPort(bound.String())
	ip := net.ParseIP(host)
	add := func(h string) { s.exact[strings.ToLower(net.JoinHostPort(h, port))] = true }
	add(host)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		add("localhost")
		add("127.0.0.1")
		add("::1")
	}
	if ip != nil && ip.IsUnspecified() {
		// An IP literal cannot be rebound: only names can.
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					add(ipn.IP.String())
				}
			}
		}
	}
	for _, n := range names {
		n = strings.ToLower(n)
		if _, _, err := net.SplitHostPort(n); err == nil {
			s.exact[n] = true
		} else {
			s.names[strings.Trim(n, "[]")] = true
		}
	}
	return s
}

// allows reports whether hostport, from a Host header or an Origin, is in
// s; a missing port is defPort, the scheme's.
func (s hostSet) allows(hostport, defPort string) bool {
	hostport = strings.ToLower(hostport)
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), defPort
	}
	if host == "" {
		return false
	}
	return s.names[host] || s.exact[net.JoinHostPort(host, port)]
}

// loopbackListen reports whether the listen address addr binds loopback
// only: localhost or a loopback IP. An empty host binds every interface.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validate checks the admin settings; Listen's form is checked already.
func (c AdminConfig) validate() error {
	if c.Listen != "" && c.Token == "" && !loopbackListen(c.Listen) {
		return cfgErr("admin.listen", fmt.Sprintf("%s is not a loopback address, and the admin API sends, takes and deletes messages: "+
			"set admin.token_file to require a bearer token, or listen on 127.0.0.1", c.Listen), ErrAdminExposed)
	}
	if c.Token != "" {
		if len(c.Token) < minAdminToken {
			return cfgErr("admin.token_file", fmt.Sprintf("the token is %d characters; use at least %d (for example: openssl rand -hex 32)", len(c.Token), minAdminToken), nil)
		}
		for _, r := range c.Token {
			if r <= ' ' || r > '~' {
				return cfgErr("admin.token_file", "the token holds a space, a control or a non-ASCII character: an HTTP header cannot carry it (for example: openssl rand -hex 32)", nil)
			}
		}
	}
	for i, h := range c.Hosts {
		if h == "" || strings.ContainsAny(h, "/ \t@") {
			return cfgErr(fmt.Sprintf("admin.hosts[%d]", i), fmt.Sprintf("%q is not a host name or host:port", h), nil)
		}
	}
	for i, root := range c.FileRoots {
		if !filepath.IsAbs(root) {
			return cfgErr(fmt.Sprintf("admin.file_roots[%d]", i), fmt.Sprintf("%q is not an absolute path", root), nil)
		}
	}
	return nil
}

// ErrAdminExposed is returned, in a *ConfigError, by Validate and Open
// when Admin.Listen is not a loopback address and Admin.Token is empty.
var ErrAdminExposed = errors.New("admin listener reachable from the network without a token")
