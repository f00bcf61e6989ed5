package petrel

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/queue"
)

// fuzzEndpoints are the admin endpoints that decode a JSON body.
var fuzzEndpoints = []string{
	"/api/send",
	"/api/recv",
	"/api/dlq/inbox/replay",
	"/api/files",
	"/api/queues/inbox/purge",
	"/api/subscribe",
	"/api/settle",
}

// FuzzAdminJSON sends arbitrary bodies to the admin endpoints that decode
// JSON, through the TCP listener's whole handler (guard included), on a
// real node: no body may crash the node or earn a 5xx. The node receives
// on "inbox" only, has the topic space events.#, and sends files only
// from one directory under the test's temporary directory. The seed corpus is in testdata/fuzz/FuzzAdminJSON.
func FuzzAdminJSON(f *testing.F) {
	dir := f.TempDir()
	roots := filepath.Join(dir, "files")
	if err := os.Mkdir(roots, 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roots, "a.txt"), []byte("a,b\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	const token = "fuzz-token-0123456789"
	cfg := Config{
		Name: "fuzz", DataDir: filepath.Join(dir, "data"), NoAutoCreate: true,
		Addresses: []AddressConfig{{Name: "inbox"}},
		Topics:    []TopicConfig{{Pattern: "events.#"}},
		Admin:     AdminConfig{Token: token, FileRoots: []string{roots}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	cfg.Store.Sync = queue.SyncNormal
	n, err := Open(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}
	h := n.admin.tcpHandler(cfg.Admin, bound)

	for i, body := range []string{
		`{"to":"inbox","text":"hello"}`,
		`{"address":"inbox","count":2,"settle":"release"}`,
		`{"count":1}`,
		`{"select":[{"origin":"00","id":"1"}]}`,
		`{"path":"` + filepath.Join(roots, "a.txt") + `","to":"inbox"}`,
		``,
		`{"lease":"00112233445566778899aabbccddeeff","settle":"nack","reason":"r"}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := fuzzEndpoints[int(which)%len(fuzzEndpoints)]
		// A recv may wait as long as it asks; the deadline bounds it, and
		// a request past it may end in any way.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
		req.Host = bound.String()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("POST %s %q: no answer 15s past its deadline\n%s", path, body, buf[:runtime.Stack(buf, true)])
		}
		// Thousands of recvs with settle "later" within a lease_timeout
		// reach the bound of leases, which answers 503 by design.
		if rec.Code >= 500 && ctx.Err() == nil && !strings.Contains(rec.Body.String(), errTooManyLeases.Error()) {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 300 && rec.Code < 400 {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
	})
}
