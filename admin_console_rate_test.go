package petrel_test

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/authlimit"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// from makes c connect from the loopback address ip (127.0.0.2...), a
// remote address of its own for the admin listener.
func (c *consoleClient) from(ip string) *consoleClient {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c.http.Transport = &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}}
	return c
}

// metric reads one sample of the node's /metrics, -1 if absent.
func (c *consoleClient) metric(sample string) int {
	c.t.Helper()
	_, body := c.do(http.MethodGet, "/metrics", "", "", map[string]string{"Authorization": ""})
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Guessing the admin token over the TCP listener is rate-limited per
// remote address, whichever way the guesses come: the login form, the
// bearer header, the session cookie.
func TestAdminTokenGuessesRateLimited(t *testing.T) {
	n := nodes.Open(t, nodes.With(withConsole))
	const wrong = "wrong-token-wrong-token-wrong"

	// The login form: the burst of wrong tokens is answered 401, the next
	// try 429 with Retry-After, the right token included.
	c := newConsoleClient(t, n)
	for i := range authlimit.DefaultBurst {
		if resp := c.login(wrong); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	resp, page := c.do(http.MethodPost, "/login", "application/x-www-form-urlencoded", "token="+wrong, nil)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || retry < 1 || retry > int(authlimit.DefaultEvery.Seconds()) {
		t.Fatalf("a login past the burst: %d, Retry-After %q; want 429 within %v", resp.StatusCode, resp.Header.Get("Retry-After"), authlimit.DefaultEvery)
	}
	if !strings.Contains(page, `class="error"`) || !strings.Contains(page, "too many wrong admin tokens") ||
		resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
		t.Fatalf("the 429 is not the login form with its reason and the CSP:\n%v\n%s", resp.Header, page)
	}
	if resp := c.login(consoleToken); resp.StatusCode != http.StatusTooManyRequests || c.cookie != nil {
		t.Fatalf("the right token while locked out: %d, cookie %v; want 429, none", resp.StatusCode, c.cookie)
	}
	bearer := map[string]string{"Authorization": "Bearer " + consoleToken}
	if resp, body := c.do(http.MethodGet, "/api/queues", "", "", bearer); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "try again") {
		t.Fatalf("the bearer token from the locked-out address: %d %s", resp.StatusCode, body)
	}
	// What carries no secret passes: probes, the login form, its style.
	for _, p := range []string{"/healthz", "/login", "/static/console.css"} {
		if resp, _ := c.do(http.MethodGet, p, "", "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s from the locked-out address: %d", p, resp.StatusCode)
		}
	}

	// Another address is not locked out.
	other := newConsoleClient(t, n).from("127.0.0.2")
	if resp := other.login(consoleToken); resp.StatusCode != http.StatusSeeOther || other.cookie == nil {
		t.Fatalf("a login from another address: %d", resp.StatusCode)
	}
	if resp, _ := other.do(http.MethodGet, "/queues", "", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a page with the session from another address: %d", resp.StatusCode)
	}

	// Bearer guesses count as well.
	api := newConsoleClient(t, n).from("127.0.0.3")
	for i := range authlimit.DefaultBurst {
		if resp, _ := api.do(http.MethodGet, "/api/queues", "", "", map[string]string{"Authorization": "Bearer " + wrong}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong bearer %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	if resp, _ := api.do(http.MethodGet, "/api/queues", "", "", bearer); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the bearer past the burst: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// And forged session cookies, on the pages and on the API.
	forger := newConsoleClient(t, n).from("127.0.0.4")
	forger.cookie = &http.Cookie{Name: console.CookieName, Value: wrong}
	for i := range authlimit.DefaultBurst {
		path := "/"
		if i%2 == 1 {
			path = "/api/queues"
		}
		if resp, _ := forger.do(http.MethodGet, path, "", "", nil); resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("forged cookie %d on %s: %d", i+1, path, resp.StatusCode)
		}
	}
	if resp, _ := forger.do(http.MethodGet, "/", "", "", nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a forged cookie past the burst: %d, want 429", resp.StatusCode)
	}

	// Counted: the 429s (2 logins, 1 bearer at 127.0.0.1, 1 bearer at
	// .3, 1 page at .4) and the three addresses with failures.
	if got := other.metric(`petrel_admin_refused_total{reason="rate_limit"}`); got != 5 {
		t.Errorf("petrel_admin_refused_total{reason=\"rate_limit\"} = %d, want 5", got)
	}
	if got := other.metric("petrel_admin_auth_failing_addresses"); got != 3 {
		t.Errorf("petrel_admin_auth_failing_addresses = %d, want 3", got)
	}
}
