package petrel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// openAdminNode opens a node with an admin TCP listener on loopback, its
// log written to logs, and closes it when the test ends.
func openAdminNode(t *testing.T, logs io.Writer) *Node {
	t.Helper()
	n, err := Open(context.Background(), Config{Name: "a", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Admin: AdminConfig{Listen: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// keepAliveGet sends GET path on c, which stays open, and reads the answer.
func keepAliveGet(c net.Conn, r *bufio.Reader, path string) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, c.RemoteAddr()); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedByServer reports whether the server closed c within wait: a read
// ends with EOF or a reset rather than its deadline.
func closedByServer(c net.Conn, r io.Reader, wait time.Duration) error {
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := r.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		return fmt.Errorf("read a byte, want the connection closed")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open after %v", wait)
	case err == nil:
		return fmt.Errorf("read nothing and no error")
	}
	return nil
}

// socketGet reads path from the node's admin unix socket.
func socketGet(t *testing.T, n *Node, path string) string {
	t.Helper()
	sock := filepath.Join(n.DataDir(), adminapi.SocketName)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://petrel" + path)
	if err != nil {
		t.Fatalf("GET %s on the socket: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on the socket: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// metricLine returns the sample of name in a /metrics answer, "" if none.
func metricLine(body, name string) string {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestAdminConnectionsBounded holds maxAdminConns keep-alive connections
// to the admin TCP listener, each after one request, as a client that
// never lets go would. The connections past them are closed as soon as
// accepted, counted and logged once; the unix socket still answers; and
// as soon as some held ones close, a GET /healthz gets through again.
func TestAdminConnectionsBounded(t *testing.T) {
	logs := &petreltest.SyncBuffer{}
	n := openAdminNode(t, logs)
	addr := n.AdminAddr()
	held := make([]net.Conn, 0, maxAdminConns)
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	start := time.Now()
	for i := range maxAdminConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
		if resp, err := keepAliveGet(c, bufio.NewReader(c), "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz on connection %d: %v %v", i, resp, err)
		}
	}
	t.Logf("%d keep-alive connections held after one request each, in %v", maxAdminConns, time.Since(start))

	const extra = 5
	for i := range extra {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue // refused by the kernel is as good
		}
		start := time.Now()
		// The server closes it at once: well before adminHeaderTimeout,
		// which would close it too.
		if err := closedByServer(c, c, 2*time.Second); err != nil {
			t.Errorf("connection %d past the bound: %v", maxAdminConns+i, err)
		} else {
			t.Logf("connection %d past the bound closed by the server in %v", maxAdminConns+i, time.Since(start))
		}
		c.Close()
	}
	// A client gets no answer over TCP, but the socket still serves.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("GET /healthz past the bound: %d, want the connection closed", resp.StatusCode)
	}
	m := socketGet(t, n, "/metrics")
	if got := metricLine(m, "petrel_admin_connections_open"); got != fmt.Sprint(maxAdminConns) {
		t.Errorf("petrel_admin_connections_open %q, want %d", got, maxAdminConns)
	}
	if got := metricLine(m, "petrel_admin_connections_refused_total"); got != fmt.Sprint(extra+1) {
		t.Errorf("petrel_admin_connections_refused_total %q, want %d", got, extra+1)
	}
	if got := strings.Count(logs.String(), "admin connection refused"); got != 1 {
		t.Errorf("%d log lines of refused connections, want 1 (at most one per %v):\n%s", got, adminConnLogEvery, logs)
	}

	// Two let go: their places come back as the server sees them close.
	for _, c := range held[:2] {
		c.Close()
	}
	held = held[2:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz: %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /healthz after two connections closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdminIdleConnectionClosed checks that the server closes a
// keep-alive connection idle for adminIdleTimeout, but not one whose
// request waits longer than that (POST /api/recv with a wait).
func TestAdminIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	defer func(d time.Duration) { adminIdleTimeout = d }(adminIdleTimeout)
	adminIdleTimeout = idle
	n := openAdminNode(t, io.Discard)

	c, err := net.Dial("tcp", n.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if resp, err := keepAliveGet(c, r, "/healthz"); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	start := time.Now()
	if err := closedByServer(c, r, 10*time.Second); err != nil {
		t.Fatalf("an idle keep-alive connection: %v", err)
	}
	if d := time.Since(start); d < idle-50*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout %v", d, idle)
	} else {
		t.Logf("idle keep-alive connection closed by the server after %v (timeout %v)", d, idle)
	}

	// A request in progress is not idle: a recv that waits three times
	// the idle timeout gets its (empty) answer, on a kept-alive
	// connection that then serves another request.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	post := func(path string, body any) *http.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := client.Post("http://"+n.AdminAddr()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return resp
	}
	resp := post(adminapi.PathSend, adminapi.SendRequest{To: "orders", Body: []byte("x")})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Read whole: a client that closes an answer unread has the message
	// released, not acked.
	resp = post(adminapi.PathRecv, adminapi.RecvRequest{Address: "orders"})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start = time.Now()
	resp = post(adminapi.PathRecv, adminapi.RecvRequest{Address: "orders", Wait: 3 * idle})
	var got adminapi.RecvResponse
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(got.Messages) != 0 || time.Since(start) < 3*idle {
		t.Fatalf("recv with a wait of %v: %d %v %+v after %v", 3*idle, resp.StatusCode, err, got, time.Since(start))
	}
	if resp, err := client.Get("http://" + n.AdminAddr() + "/healthz"); err != nil {
		t.Fatalf("GET /healthz after the wait: %v", err)
	} else {
		resp.Body.Close()
	}

	// Nor is the console's event stream, which never ends by itself.
	resp, err = client.Get("http://" + n.AdminAddr() + "/events?page=node")
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	start = time.Now()
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("the event stream ended after %v (%v), before 3 idle timeouts", time.Since(start), err)
	case <-time.After(3 * idle):
	}
	resp.Body.Close()
	<-read
}

// TestAdminBodyThatNeverComesIsCut: requests that announce a body and send
// none of it, or trickle it, are cut once their body is late, refused ones
// (no token) and bodiless handlers (/healthz) included. Before, net/http
// waited for the body without a deadline, and 256 of them shut out every
// operator. A body that comes whole is read, and a request that then waits
// (here a recv of 2 s) is not cut by the bound.
func TestAdminBodyThatNeverComesIsCut(t *testing.T) {
	defer func(d time.Duration, r float64) { adminBodyTime, adminBodyMinRate = d, r }(adminBodyTime, adminBodyMinRate)
	adminBodyTime, adminBodyMinRate = time.Second, 1024
	n := openAdminNode(t, io.Discard)
	addr := n.AdminAddr()
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\n",
		"POST /api/queues HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n",
		"POST /api/send HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"to\":",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := fmt.Fprintf(c, req, addr); err != nil {
			t.Fatal(err)
		}
		// The answer, if any (a 400 for the cut body), then the close.
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%q: the connection was held %v, want it cut within about 1 s", strings.SplitN(req, "\r", 2)[0], took)
		}
	}

	// A trickle: a byte every 300 ms is below 1 KiB/s, and is cut.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/send HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", addr)
	start := time.Now()
	for time.Since(start) < 6*time.Second {
		if _, err := c.Write([]byte(" ")); err != nil {
			break // cut
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil { // its answer, if any, then EOF
		t.Fatalf("a trickled body after %v: %v, want the connection closed", time.Since(start), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a trickled body held its connection %v", took)
	}

	// A whole body, then a wait longer than the bound: answered in full.
	if _, err := n.Consumer("orders"); err != nil { // makes the queue
		t.Fatal(err)
	}
	body := `{"address":"orders","count":1,"wait":2000000000}`
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "POST /api/recv HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	sent := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatalf("a recv that waits past the body's bound: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a recv that waits past the body's bound: %d %s", resp.StatusCode, got)
	}
	if took := time.Since(sent); took < 1900*time.Millisecond {
		t.Fatalf("a recv of 2 s answered after %v: %d %s", took, resp.StatusCode, got)
	}
}

// TestBodyDeadlineLiftedOnceReadWhole: a handler that reads its body to
// the end and then waits is not cut by the body's bound. net/http starts
// reading the connection, to notice a client that goes away, as soon as
// the body ends, and lifts the deadline as it does; a deadline set again
// after that would fail that read and cancel the request.
func TestBodyDeadlineLiftedOnceReadWhole(t *testing.T) {
	defer func(d time.Duration) { adminBodyTime = d }(adminBodyTime)
	adminBodyTime = 300 * time.Millisecond
	result := make(chan error, 1)
	srv := &http.Server{Handler: bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			result <- err
			return
		}
		select {
		case <-r.Context().Done():
			result <- fmt.Errorf("the request was cancelled while it waited: %w", context.Cause(r.Context()))
		case <-time.After(time.Second):
			result <- nil
		}
	}))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Post("http://"+ln.Addr().String(), "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// TestAdminHeaderBounded: a request header past adminMaxHeaderBytes is
// answered 431 before the token is checked, so that anyone who reaches the
// port cannot make the node hold a MiB per connection (net/http's
// default); one within it, a browser's cookies included, is served.
func TestAdminHeaderBounded(t *testing.T) {
	n := openAdminNode(t, io.Discard)
	get := func(header int) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+n.AdminAddr()+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", "c="+strings.Repeat("x", header))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(16 << 10); code != http.StatusOK {
		t.Fatalf("a 16 KiB header: %d, want 200", code)
	}
	if code := get(200 << 10); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 200 KiB header: %d, want 431", code)
	}
}
