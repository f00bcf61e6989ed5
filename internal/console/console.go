package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/ratelog"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName is the session cookie: it holds the admin token, Secure,
// HttpOnly and SameSite=Strict.
const CookieName = "petrel_console"

// CSRFHeader carries the CSRF token on the pages' requests to the JSON
// API; CSRFField on the logout form.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf"
)

// ContentSecurityPolicy is sent with every answer of the console: nothing
// but the node's own scripts, styles and images, no inline script or
// style, no framing, no form posted elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configure a Server.
type Options struct {
	Source Source
	// Token is the admin token; "" leaves the console open, as the admin
	// API is on a loopback listener without one.
	Token string
	Log   *slog.Logger
	// Interval is how often the figures are sampled and the pages
	// updated (default 2s).
	Interval time.Duration
	// WriteTimeout bounds each write to an event stream (default
	// DefaultWriteTimeout): a reader that stops reading is dropped.
	WriteTimeout time.Duration
	// Stats, if set, counts the event streams (streams.go).
	Stats *Stats
}

// Server serves the console.
type Server struct {
	src      Source
	log      *slog.Logger
	token    [sha256.Size]byte
	hasToken bool
	csrfKey  [32]byte
	interval time.Duration
	pages    map[string]*template.Template
	sampler  *sampler
	heads    headCache // the oldest message of the queues shown

	// closing ends the event streams and their feeds (streams.go);
	// streams counts both, and ctx, cancelled with closing, ends the
	// feeds' reads of the node. mu orders a stream's start against Close,
	// and guards open and feeds.
	closing      chan struct{}
	ctx          context.Context
	cancel       context.CancelFunc
	mu           sync.Mutex
	closed       bool
	streams      sync.WaitGroup
	open         map[*stream]struct{}
	feeds        map[string]*feed
	stats        *Stats
	writeTimeout time.Duration
	logs         ratelog.Limiter // once a minute for each warning of the streams
	closeSampler sync.Once
}

// New makes the console of opts.Source and starts its sampler; Close
// stops it.
func New(opts Options) (*Server, error) {
	s := &Server{src: opts.Source, log: opts.Log, interval: opts.Interval, closing: make(chan struct{}),
		open: map[*stream]struct{}{}, feeds: map[string]*feed{}, stats: opts.Stats, writeTimeout: opts.WriteTimeout}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.stats == nil {
		s.stats = &Stats{}
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.interval <= 0 {
		s.interval = 2 * time.Second
	}
	if opts.Token != "" {
		s.hasToken = true
		s.token = sha256.Sum256([]byte(opts.Token))
	}
	if _, err := rand.Read(s.csrfKey[:]); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages
	s.sampler = newSampler(s.src, s.interval)
	return s, nil
}

// Close ends the event streams and the sampler, and waits for the
// streams until ctx ends. A stream blocked writing to a reader that
// stopped reading has its write ended at once, rather than at its write
// timeout: before, Close waited for it for ever, and the node's stop ran
// out of time with its store still open.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
		s.cancel()
		s.endWrites()
	}
	s.mu.Unlock()
	err := s.waitStreams(ctx)
	s.closeSampler.Do(s.sampler.close)
	return err
}

// IsConsolePath reports whether path is one of the console's own paths; the admin guard lets them through
// without the bearer token, since the console asks for its cookie itself.
func IsConsolePath(path string) bool {
	switch {
	case path == "/", path == "/login", path == "/logout", path == "/events",
		path == "/queues", path == "/transfers", path == "/node",
		strings.HasPrefix(path, "/queues/"), strings.HasPrefix(path, "/static/"):
		return true
	}
	return false
}

// FormPath reports whether path takes an HTML form POST (not JSON): the
// login and logout forms.
func FormPath(path string) bool { return path == "/login" || path == "/logout" }

// Handler returns the console's routes, to mount at "/" of the admin
// listener.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	mux.HandleFunc("GET /login", s.handleLoginForm)
	mux.HandleFunc("POST /login", s.handleLogin)
	mux.HandleFunc("POST /logout", s.loggedIn(s.handleLogout))
	mux.HandleFunc("GET /{$}", s.loggedIn(s.page("network")))
	mux.HandleFunc("GET /queues", s.loggedIn(s.page("queues")))
	mux.HandleFunc("GET /queues/{queue}", s.loggedIn(s.page("queue")))
	mux.HandleFunc("GET /transfers", s.loggedIn(s.page("transfers")))
	mux.HandleFunc("GET /node", s.loggedIn(s.page("node")))
	mux.HandleFunc("GET /events", s.loggedIn(s.handleEvents))
	return securityHeaders(mux)
}

// securityHeaders adds the CSP and its companions to every answer.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with form posts, which the admin guard refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// Session reports whether r carries the session cookie of the admin
// token (always true without a token).
func (s *Server) Session(r *http.Request) bool {
	if !s.hasToken {
		return true
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(c.Value))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

// CarriesSession reports whether r carries a session cookie, right or
// wrong: a secret to check, which the admin guard's rate limit counts.
func CarriesSession(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && c.Value != ""
}

// RefuseLimited answers r, from an address that failed too many checks,
// with 429 and msg: the login form with msg as its error for a page or a
// login, plain text for the event stream or a logout. The caller set
// Retry-After.
func (s *Server) RefuseLimited(w http.ResponseWriter, r *http.Request, msg string) {
	securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" || r.URL.Path == "/logout" {
			http.Error(w, msg, http.StatusTooManyRequests)
			return
		}
		s.render(w, r, http.StatusTooManyRequests, "login", pageData{Title: "Log in", Error: msg})
	})).ServeHTTP(w, r)
}

// csrfToken is the CSRF token of r's session: an HMAC of its cookie under
// a key of this process, so a page of another origin, which can neither
// read the cookie nor the page, cannot know it.
func (s *Server) csrfToken(r *http.Request) string {
	var v string
	if c, err := r.Cookie(CookieName); err == nil {
		v = c.Value
	}
	m := hmac.New(sha256.New, s.csrfKey[:])
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// CSRFValid reports whether r carries its session's CSRF token, in the
// X-CSRF-Token header or the form field csrf.
func (s *Server) CSRFValid(r *http.Request) bool {
	got := r.Header.Get(CSRFHeader)
	if got == "" && FormPath(r.URL.Path) {
		got = r.PostFormValue(CSRFField)
	}
	want := s.csrfToken(r)
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}

// loggedIn sends a browser without a session to the login form.
func (s *Server) loggedIn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.Session(r) {
			if r.URL.Path == "/events" || r.Method != http.MethodGet {
				http.Error(w, "log in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		h(w, r)
	}
}

func (s *Server) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", pageData{Title: "Log in"})
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	// A browser sends Origin with every form POST; the admin guard
	// checked it is this listener's. Without it, the form did not come
	// from a browser page of ours.
	if r.Header.Get("Origin") == "" {
		http.Error(w, "a login needs the Origin header of a browser form", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	sum := sha256.Sum256([]byte(tok))
	if !s.hasToken || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
		if !s.hasToken {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		s.log.Warn("console login refused", slog.String("remote", r.RemoteAddr))
		s.render(w, r, http.StatusUnauthorized, "login", pageData{Title: "Log in", Error: "That is not the admin token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", MaxAge: 12 * 3600,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if s.hasToken && !s.CSRFValid(r) {
		http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
