package petrel

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// guardCase is one request to an adminGuard and the status it must get.
type guardCase struct {
	name                 string
	method, path, host   string
	origin, auth, ctype  string
	want                 int
	wantAuthenticateHint bool
}

func TestAdminGuard(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}
	wildcard := &net.TCPAddr{IP: net.IPv4zero, Port: 9090}
	const token = "0123456789abcdef0123"
	for _, tc := range []struct {
		name  string
		cfg   AdminConfig
		bound net.Addr
		cases []guardCase
	}{
		{"loopback without a token", AdminConfig{}, loopback, []guardCase{
			{name: "own address", host: "127.0.0.1:9090", want: 200},
			{name: "localhost", host: "localhost:9090", want: 200},
			{name: "localhost in capitals", host: "LOCALHOST:9090", want: 200},
			{name: "ipv6 loopback", host: "[::1]:9090", want: 200},
			{name: "rebound name", host: "attacker.example:9090", want: 403},
			{name: "other port", host: "127.0.0.1:9091", want: 403},
			{name: "no port is port 80", host: "localhost", want: 403},
			{name: "empty host", host: "", want: 403},
			{name: "same origin", host: "127.0.0.1:9090", origin: "http://localhost:9090", want: 200},
			{name: "foreign origin", host: "127.0.0.1:9090", origin: "http://attacker.example", want: 403},
			{name: "foreign origin on our port", host: "127.0.0.1:9090", origin: "http://attacker.example:9090", want: 403},
			{name: "null origin", host: "127.0.0.1:9090", origin: "null", want: 403},
			{name: "other scheme", host: "127.0.0.1:9090", origin: "ftp://localhost:9090", want: 403},
			{name: "json post", method: "POST", path: "/api/send", host: "127.0.0.1:9090", ctype: "application/json", want: 200},
			{name: "json post with charset", method: "POST", path: "/api/send", host: "127.0.0.1:9090", ctype: "application/json; charset=utf-8", want: 200},
			{name: "text post", method: "POST", path: "/api/send", host: "127.0.0.1:9090", ctype: "text/plain", want: 415},
			{name: "form post", method: "POST", path: "/api/send", host: "127.0.0.1:9090", ctype: "application/x-www-form-urlencoded", want: 415},
			{name: "post without a type", method: "POST", path: "/api/send", host: "127.0.0.1:9090", want: 415},
			{name: "no token asked", host: "127.0.0.1:9090", auth: "Bearer whatever", want: 200},
		}},
		{"loopback with a token", AdminConfig{Token: token}, loopback, []guardCase{
			{name: "no token", host: "127.0.0.1:9090", want: 401, wantAuthenticateHint: true},
			{name: "wrong token", host: "127.0.0.1:9090", auth: "Bearer " + token + "x", want: 401, wantAuthenticateHint: true},
			{name: "prefix of the token", host: "127.0.0.1:9090", auth: "Bearer " + token[:10], want: 401, wantAuthenticateHint: true},
			{name: "basic", host: "127.0.0.1:9090", auth: "Basic " + token, want: 401, wantAuthenticateHint: true},
			{name: "token", host: "127.0.0.1:9090", auth: "Bearer " + token, want: 200},
			{name: "scheme in lower case", host: "127.0.0.1:9090", auth: "bearer " + token, want: 200},
			{name: "healthz needs none", path: "/healthz", host: "127.0.0.1:9090", want: 200},
			{name: "readyz needs none", path: "/readyz", host: "127.0.0.1:9090", want: 200},
			{name: "metrics needs none", path: "/metrics", host: "127.0.0.1:9090", want: 200},
			{name: "host before token", host: "attacker.example:9090", want: 403},
			{name: "token before content type", method: "POST", path: "/api/send", host: "127.0.0.1:9090", ctype: "text/plain", want: 401, wantAuthenticateHint: true},
			{name: "text post with the token", method: "POST", path: "/api/send", host: "127.0.0.1:9090", auth: "Bearer " + token, ctype: "text/plain", want: 415},
		}},
		{"metrics_auth", AdminConfig{Token: token, MetricsAuth: true}, loopback, []guardCase{
			{name: "metrics without the token", path: "/metrics", host: "127.0.0.1:9090", want: 401, wantAuthenticateHint: true},
			{name: "metrics with the token", path: "/metrics", host: "127.0.0.1:9090", auth: "Bearer " + token, want: 200},
			{name: "healthz still needs none", path: "/healthz", host: "127.0.0.1:9090", want: 200},
		}},
		{"configured names", AdminConfig{Token: token, Hosts: []string{"Petrel.example.com", "proxy:8443"}}, loopback, []guardCase{
			{name: "name without a port", host: "petrel.example.com", auth: "Bearer " + token, want: 200},
			{name: "name on any port", host: "petrel.example.com:9090", auth: "Bearer " + token, want: 200},
			{name: "name with its port", host: "proxy:8443", auth: "Bearer " + token, want: 200},
			{name: "name on another port", host: "proxy:8444", auth: "Bearer " + token, want: 403},
			{name: "https origin of a name", host: "petrel.example.com", origin: "https://petrel.example.com", auth: "Bearer " + token, want: 200},
			{name: "origin of a sub-domain", host: "petrel.example.com", origin: "https://x.petrel.example.com", auth: "Bearer " + token, want: 403},
		}},
		{"wildcard listener", AdminConfig{Token: token}, wildcard, []guardCase{
			{name: "loopback ip", host: "127.0.0.1:9090", auth: "Bearer " + token, want: 200},
			{name: "a name", host: "attacker.example:9090", auth: "Bearer " + token, want: 403},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := newAdminRefused()
			ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
			g := newAdminGuard(ok, tc.cfg, tc.bound, refused)
			for _, c := range tc.cases {
				t.Run(c.name, func(t *testing.T) {
					rec := serveGuard(g, c)
					if rec.Code != c.want {
						t.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
					}
					if c.want >= 400 && !strings.Contains(rec.Body.String(), `"error"`) {
						t.Errorf("refusal without a JSON error: %s", rec.Body)
					}
					if got := rec.Header().Get("WWW-Authenticate"); c.wantAuthenticateHint != strings.HasPrefix(got, "Bearer") {
						t.Errorf("WWW-Authenticate %q", got)
					}
					if strings.Contains(rec.Body.String(), token) {
						t.Errorf("the answer shows the token: %s", rec.Body)
					}
				})
			}
			var want float64
			for _, c := range tc.cases {
				if c.want >= 400 {
					want++
				}
			}
			var got float64
			for _, v := range refusals(t, refused) {
				got += v
			}
			if got != want {
				t.Errorf("petrel_admin_refused_total sums to %v, want %v", got, want)
			}
		})
	}
}

func serveGuard(h http.Handler, c guardCase) *httptest.ResponseRecorder {
	method, path := c.method, c.path
	if method == "" {
		method = http.MethodGet
	}
	if path == "" {
		path = "/api/status"
	}
	req := httptest.NewRequest(method, path, strings.NewReader("{}"))
	req.Host = c.host
	for k, v := range map[string]string{"Origin": c.origin, "Authorization": c.auth, "Content-Type": c.ctype} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// The socket checks only the Content-Type of POSTs.
func TestRequireJSON(t *testing.T) {
	refused := newAdminRefused()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := requireJSON(ok, refused)
	for _, c := range []guardCase{
		{name: "get from anywhere", host: "attacker.example", origin: "http://attacker.example", want: 200},
		{name: "json post", method: "POST", host: "petrel", ctype: "application/json", want: 200},
		{name: "text post", method: "POST", host: "petrel", ctype: "text/plain", want: 415},
	} {
		t.Run(c.name, func(t *testing.T) {
			if rec := serveGuard(h, c); rec.Code != c.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
		})
	}
	if got := refusals(t, refused); len(got) != 1 || got[refusedContentType] != 1 {
		t.Errorf("refusals %v, want content_type 1", got)
	}
}

func TestAdminConfigValidate(t *testing.T) {
	const token = "s3cret-token-0123456789"
	for _, tc := range []struct {
		name  string
		cfg   AdminConfig
		field string // "" when valid
		is    error
	}{
		{"loopback without a token", AdminConfig{Listen: "127.0.0.1:0"}, "", nil},
		{"localhost without a token", AdminConfig{Listen: "localhost:9090"}, "", nil},
		{"ipv6 loopback without a token", AdminConfig{Listen: "[::1]:0"}, "", nil},
		{"every interface without a token", AdminConfig{Listen: ":9090"}, "admin.listen", ErrAdminExposed},
		{"wildcard without a token", AdminConfig{Listen: "0.0.0.0:0"}, "admin.listen", ErrAdminExposed},
		{"a name without a token", AdminConfig{Listen: "node.example.com:9090"}, "admin.listen", ErrAdminExposed},
		{"wildcard with a token", AdminConfig{Listen: "0.0.0.0:0", Token: token}, "", nil},
		{"short token", AdminConfig{Listen: "127.0.0.1:0", Token: "short"}, "admin.token_file", nil},
		{"token with a space", AdminConfig{Listen: "127.0.0.1:0", Token: "s3cret token 0123456789"}, "admin.token_file", nil},
		{"token with a newline", AdminConfig{Listen: "127.0.0.1:0", Token: token + "\n"}, "admin.token_file", nil},
		{"host as a URL", AdminConfig{Hosts: []string{"http://x"}}, "admin.hosts[0]", nil},
		{"empty host", AdminConfig{Hosts: []string{"a", ""}}, "admin.hosts[1]", nil},
		{"relative file root", AdminConfig{FileRoots: []string{"/srv", "out"}}, "admin.file_roots[1]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Name: "a", Admin: tc.cfg}.Validate()
			var ce *ConfigError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.field == "":
				return
			case !errors.As(err, &ce) || ce.Field != tc.field:
				t.Fatalf("Validate = %v, want a problem of %s", err, tc.field)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("Validate = %v, want %v", err, tc.is)
			case strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

func TestFileUnderRoots(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{root, filepath.Join(root, "sub"), outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(root, "sub", "in.txt"), filepath.Join(outside, "secret.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustLink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "escape.txt"))
	mustLink(outside, filepath.Join(root, "escape-dir"))
	mustLink(root, filepath.Join(dir, "root-link"))
	in := filepath.Join(root, "sub", "in.txt")
	for _, tc := range []struct {
		name  string
		path  string
		roots []string
		code  int // 0: accepted
		want  string
	}{
		{"inside", in, []string{root}, 0, in},
		{"inside, root with a slash", in, []string{root + "/"}, 0, in},
		{"inside, through a linked root", filepath.Join(dir, "root-link", "sub", "in.txt"), []string{filepath.Join(dir, "root-link")}, 0, in},
		{"no roots", in, nil, 403, ""},
		{"relative", "sub/in.txt", []string{root}, 400, ""},
		{"outside", filepath.Join(outside, "secret.txt"), []string{root}, 403, ""},
		{"dot-dot out", filepath.Join(root, "sub") + "/../../outside/secret.txt", []string{root}, 403, ""},
		{"root's sibling with its prefix", root + "-other/x", []string{root}, 403, ""},
		{"link to a file outside", filepath.Join(root, "escape.txt"), []string{root}, 403, ""},
		{"link to a directory outside", filepath.Join(root, "escape-dir", "secret.txt"), []string{root}, 403, ""},
		{"missing inside", filepath.Join(root, "nosuch"), []string{root}, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code, err := fileUnderRoots(tc.path, tc.roots)
			if code != tc.code || (code == 0) != (err == nil) || got != tc.want {
				t.Fatalf("fileUnderRoots = %q, %d, %v; want %q, %d", got, code, err, tc.want, tc.code)
			}
			if code == 403 && !strings.Contains(err.Error(), "admin.file_roots") {
				t.Errorf("refusal %q does not name admin.file_roots", err)
			}
		})
	}
}

// refusals reads the counter's values by reason.
func refusals(t *testing.T, c *prometheus.CounterVec) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}
