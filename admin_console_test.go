package petrel_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// The console's security, from HTTP: the login, its cookie, the CSRF
// token and the Content-Security-Policy. The browser test in cmd/petrel
// drives the same through Chromium.

const consoleToken = "console-test-token-0123456789"

func withConsole(c *petrel.Config) {
	c.Admin.Listen = "127.0.0.1:0"
	c.Admin.Token = consoleToken
}

// consoleClient talks to a node's admin listener as a browser would: no
// redirects followed, its Origin on POSTs, and the session cookie once
// logged in.
type consoleClient struct {
	t      *testing.T
	base   string
	cookie *http.Cookie
	http   *http.Client
}

func newConsoleClient(t *testing.T, n *petrel.Node) *consoleClient {
	c := &consoleClient{t: t, base: "http://" + n.AdminAddr(), http: &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	return c
}

func (c *consoleClient) do(method, path, ctype, body string, header map[string]string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", c.base)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

func (c *consoleClient) login(token string) *http.Response {
	c.t.Helper()
	resp, _ := c.do(http.MethodPost, "/login", "application/x-www-form-urlencoded", url.Values{"token": {token}}.Encode(), nil)
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName && ck.Value != "" {
			c.cookie = ck
		}
	}
	return resp
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`)

// csrf reads the CSRF token from a page, as the console's script does.
func (c *consoleClient) csrf() string {
	c.t.Helper()
	_, page := c.do(http.MethodGet, "/queues", "", "", nil)
	m := csrfMeta.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func TestConsoleLoginCookieAndCSRF(t *testing.T) {
	n := nodes.Open(t, nodes.With(withConsole))
	c := newConsoleClient(t, n)

	// The login is required, for the pages and the API alike.
	for _, p := range []string{"/", "/queues", "/queues/orders", "/transfers", "/node"} {
		if resp, _ := c.do(http.MethodGet, p, "", "", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := c.do(http.MethodGet, "/events?page=queues", "", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the event stream without a session: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.do(http.MethodGet, "/api/queues", "", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without a session: %d, want 401", resp.StatusCode)
	}
	if resp := c.login("wrong-token-wrong-token-wrong"); resp.StatusCode != http.StatusUnauthorized || c.cookie != nil {
		t.Fatalf("a wrong token logged in: %d, cookie %v", resp.StatusCode, c.cookie)
	}
	// A login without Origin did not come from a browser's form.
	if resp, _ := c.do(http.MethodPost, "/login", "application/x-www-form-urlencoded", "token="+consoleToken, map[string]string{"Origin": ""}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a login without Origin: %d, want 403", resp.StatusCode)
	}
	if resp := c.login(consoleToken); resp.StatusCode != http.StatusSeeOther || c.cookie == nil {
		t.Fatalf("the login: %d, cookie %v", resp.StatusCode, c.cookie)
	}
	if !c.cookie.Secure || !c.cookie.HttpOnly || c.cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the session cookie is not Secure, HttpOnly and SameSite=Strict: %+v", c.cookie)
	}

	// Reading needs only the cookie; a change needs the CSRF token too.
	if resp, body := c.do(http.MethodGet, "/api/queues", "", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/queues with the session: %d %s", resp.StatusCode, body)
	}
	send := `{"to":"orders","text":"from the console"}`
	if resp, body := c.do(http.MethodPost, "/api/send", "application/json", send, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("a send without the CSRF token: %d %s, want 403", resp.StatusCode, body)
	}
	if resp, _ := c.do(http.MethodPost, "/api/send", "application/json", send, map[string]string{console.CSRFHeader: strings.Repeat("0", 64)}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a send with a wrong CSRF token: %d, want 403", resp.StatusCode)
	}
	token := c.csrf()
	if resp, body := c.do(http.MethodPost, "/api/send", "application/json", send, map[string]string{console.CSRFHeader: token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a send with the CSRF token: %d %s", resp.StatusCode, body)
	}
	// The JSON rule still holds for the session: a form post to the API
	// is refused.
	if resp, _ := c.do(http.MethodPost, "/api/send", "application/x-www-form-urlencoded", "to=orders", map[string]string{console.CSRFHeader: token}); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a form post to the API: %d, want 415", resp.StatusCode)
	}
	// Every refusal for the CSRF token is counted, the logout form's too.
	if got := c.metric(`petrel_admin_refused_total{reason="csrf"}`); got != 2 {
		t.Fatalf("petrel_admin_refused_total{reason=\"csrf\"} = %d after 2 sends without it, want 2", got)
	}
	if resp, _ := c.do(http.MethodPost, "/logout", "application/x-www-form-urlencoded", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a logout without the CSRF token: %d, want 403", resp.StatusCode)
	}
	if resp, _ := c.do(http.MethodPost, "/logout", "application/x-www-form-urlencoded", "csrf="+strings.Repeat("0", 64), nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a logout with a wrong CSRF token: %d, want 403", resp.StatusCode)
	}
	if got := c.metric(`petrel_admin_refused_total{reason="csrf"}`); got != 4 {
		t.Fatalf("petrel_admin_refused_total{reason=\"csrf\"} = %d after 2 logouts without it, want 4", got)
	}
	if resp, _ := c.do(http.MethodPost, "/logout", "application/x-www-form-urlencoded", "csrf="+token, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a logout with the CSRF token: %d, want 303", resp.StatusCode)
	}
	// The bearer token works as before, with no CSRF token.
	c.cookie = nil
	if resp, body := c.do(http.MethodPost, "/api/send", "application/json", send, map[string]string{"Authorization": "Bearer " + consoleToken}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a send with the bearer token: %d %s", resp.StatusCode, body)
	}
	if st, _ := n.QueueStat("orders"); st.Depth != 2 {
		t.Fatalf("orders holds %d messages, want the 2 sent", st.Depth)
	}
}

// inlineCode finds what a strict CSP would block: a script element with
// a body, an event handler attribute, a style element or attribute, a
// javascript: URL.
var inlineCode = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|<style|\sstyle\s*=|javascript:`)

func TestConsoleCSPAndWeight(t *testing.T) {
	n := nodes.Open(t, nodes.With(withConsole))
	m := n.Producer().CreateDataMessage("orders")
	m.Body = []byte("x")
	if err := n.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	c := newConsoleClient(t, n)
	c.login(consoleToken)
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(console.ContentSecurityPolicy, d) {
			t.Fatalf("the CSP lacks %q: %s", d, console.ContentSecurityPolicy)
		}
	}
	if strings.Contains(console.ContentSecurityPolicy, "unsafe") {
		t.Fatalf("the CSP allows something unsafe: %s", console.ContentSecurityPolicy)
	}
	total := 0
	assets := map[string]bool{}
	for _, p := range []string{"/login", "/", "/queues", "/queues/orders", "/transfers", "/node"} {
		resp, body := c.do(http.MethodGet, p, "", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q", p, got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: missing nosniff or frame denial: %v", p, resp.Header)
		}
		if m := inlineCode.FindString(body); m != "" {
			t.Errorf("GET %s: inline code %q", p, m)
		}
		for _, m := range regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"`).FindAllStringSubmatch(body, -1) {
			assets[m[1]] = true
		}
		t.Logf("%s: %d bytes", p, len(body))
		total = max(total, len(body))
	}
	page := total // the heaviest page, plus every asset it may load
	for a := range assets {
		resp, body := c.do(http.MethodGet, a, "", "", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("GET %s: %d, CSP %q", a, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
		t.Logf("%s: %d bytes", a, len(body))
		total += len(body)
	}
	t.Logf("page weight: heaviest page %d bytes, with its %d assets %d bytes (bound 200 KB)", page, len(assets), total)
	if total >= 200<<10 {
		t.Fatalf("the console weighs %d bytes, over 200 KB", total)
	}
}

// An open event stream neither keeps the node from closing nor leaks
// (the package's TestMain checks goroutines).
func TestConsoleStreamEndsOnClose(t *testing.T) {
	n, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: nodes.Quiet,
		Admin: petrel.AdminConfig{Listen: "127.0.0.1:0", Token: consoleToken}})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsoleClient(t, n)
	c.login(consoleToken)
	req, _ := http.NewRequest(http.MethodGet, c.base+"/events?page=node", nil)
	req.AddCookie(c.cookie)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("the event stream: %d %q", resp.StatusCode, ct)
	}
	// The node page changes every second (its uptime): an event comes.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("the first line of the stream: %q %v", line, err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not close with an event stream open")
	}
	if _, err := io.ReadAll(resp.Body); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("stream ended: %v", err)
	}
}
