package petrel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/queue"
)

// The console's event streams (GET /events) through the admin listener of
// a real node: their bound, their metrics, the one drawing a tick that
// streams on one page share, and a reader that stops reading.

// shortConsoleTimes makes the console redraw its pages every interval and
// bounds each write to a stream by writeTimeout, until the test ends.
func shortConsoleTimes(t *testing.T, interval, writeTimeout time.Duration) {
	i, w := consoleInterval, consoleWriteTimeout
	t.Cleanup(func() { consoleInterval, consoleWriteTimeout = i, w })
	consoleInterval, consoleWriteTimeout = interval, writeTimeout
}

// openStream sends GET /events?query on a new connection to n's admin
// listener and reads the answer's header; rcvbuf, if not 0, is the
// socket's receive buffer, set before it connects.
func openStream(t *testing.T, n *Node, query string, rcvbuf int) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	c, err := d.Dial("tcp", n.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /events?%s HTTP/1.1\r\nHost: %s\r\n\r\n", query, n.AdminAddr())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 256)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET /events?%s: %v", query, err)
	}
	c.SetReadDeadline(time.Time{})
	return c, br, resp
}

// nextEvent reads the stream's next event, its data lines joined.
func nextEvent(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && len(data) > 0:
			return strings.Join(data, "\n")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

// adminMetric reads one sample from the node's /metrics, over its admin
// socket.
func adminMetric(t *testing.T, n *Node, name string) int {
	t.Helper()
	v, err := strconv.Atoi(metricLine(socketGet(t, n, "/metrics"), name))
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

// busyQueues makes 100 queues of long names, so that the Queues page is
// large (about 120 KB), and sends to them every 20 ms until the test
// ends, so that it changes at every drawing.
func busyQueues(t *testing.T, n *Node) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	sendTo := func(i int) error {
		m := n.Producer().CreateDataMessage(fmt.Sprintf("queue-with-a-long-name-to-fill-the-row-%03d-%s", i, strings.Repeat("x", 60)))
		m.Body = []byte("x")
		return n.Producer().Send(ctx, m)
	}
	for i := range 100 {
		if err := sendTo(i); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if sendTo(i%100) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
}

// sendQueue returns the bytes the node's socket from local to remote
// has not yet sent or had acknowledged (/proc/net/tcp), -1 if not found.
func sendQueue(t *testing.T, local, remote net.Addr) int64 {
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp to see the stream's socket fill: %v", err)
	}
	lp, rp := local.(*net.TCPAddr).Port, remote.(*net.TCPAddr).Port
	want := fmt.Sprintf(":%04X", lp)
	wantR := fmt.Sprintf(":%04X", rp)
	for _, l := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 5 || !strings.HasSuffix(f[1], want) || !strings.HasSuffix(f[2], wantR) {
			continue
		}
		tx, _, _ := strings.Cut(f[4], ":")
		v, err := strconv.ParseInt(tx, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return -1
}

// stalledStream opens a stream on the Queues page, kept busy, with a
// receive buffer of 4 KiB, never read, and waits until the node's side of
// its socket is full: its send queue large and no longer growing while
// the page changes.
func stalledStream(t *testing.T, n *Node) {
	t.Helper()
	busyQueues(t, n)
	c, _, resp := openStream(t, n, "page=queues", 4096)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %s", resp.Status)
	}
	var last int64 = -1
	petreltest.Eventually(t, "the stream's socket full", func() bool {
		q := sendQueue(t, c.RemoteAddr(), c.LocalAddr())
		full := q >= 256<<10 && q == last
		last = q
		return full
	}, func() string { return fmt.Sprintf("send queue %d bytes", last) })
}

// Past console.MaxStreams a stream is refused with 503 and says why;
// petrel_console_streams and petrel_console_streams_refused_total follow,
// and once one closes, a new one opens.
func TestConsoleStreamsBounded(t *testing.T) {
	n := openAdminNode(t, io.Discard)
	var conns []net.Conn
	for range console.MaxStreams {
		c, _, resp := openStream(t, n, "page=node", 0)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", len(conns)+1, resp.Status)
		}
		conns = append(conns, c)
	}
	if got := adminMetric(t, n, "petrel_console_streams"); got != console.MaxStreams {
		t.Fatalf("petrel_console_streams %d with %d open", got, console.MaxStreams)
	}
	c, br, resp := openStream(t, n, "page=queues", 0)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the stream past the bound: %s", resp.Status)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "too many console event streams") {
		t.Fatalf("the stream past the bound: %s %q", resp.Status, body)
	}
	// Its connection is closed, not kept for another request: refused
	// streams must not hold the listener's connections.
	if err := closedByServer(c, br, 5*time.Second); err != nil {
		t.Fatalf("the refused stream's connection: %v", err)
	}
	if got := adminMetric(t, n, "petrel_console_streams_refused_total"); got != 1 {
		t.Fatalf("petrel_console_streams_refused_total %d", got)
	}
	conns[0].Close()
	petreltest.Eventually(t, "the closed stream's place given back", func() bool {
		return adminMetric(t, n, "petrel_console_streams") == console.MaxStreams-1
	})
	if _, _, resp := openStream(t, n, "page=queues", 0); resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream once one closed: %s", resp.Status)
	}
}

// Two streams on one page get the same events from one drawing a tick:
// petrel_console_renders_total grows by one per event, not two.
func TestConsoleStreamsShareOneRender(t *testing.T) {
	shortConsoleTimes(t, 200*time.Millisecond, 0)
	n := openAdminNode(t, io.Discard)
	// The Queues page changes at every drawing: two streams on it (the
	// parameter the page does not read makes no other drawing).
	busyQueues(t, n)
	c1, r1, _ := openStream(t, n, "page=queues", 0)
	c2, r2, _ := openStream(t, n, "page=queues&x=1", 0)
	first1, first2 := nextEvent(t, c1, r1), nextEvent(t, c2, r2)
	if first1 != first2 {
		t.Fatalf("the first events of two streams on one page differ")
	}
	before := adminMetric(t, n, "petrel_console_renders_total")
	const events = 4
	for range events {
		if e1, e2 := nextEvent(t, c1, r1), nextEvent(t, c2, r2); e1 != e2 {
			t.Fatalf("two streams on one page got different events")
		}
	}
	// Each event is a drawing of its own; besides them, at most the one
	// under way as the counter was read at either end. Drawn once per
	// stream, they would be at least 2*events-2.
	if got := adminMetric(t, n, "petrel_console_renders_total") - before; got < events || got > events+1 {
		t.Fatalf("%d drawings for %d events on two streams of one page; want %d or %d", got, events, events, events+1)
	}
}

// A stream whose reader stops reading does not hold the node's stop:
// Close returns nil, its whole stop run (the store closed), in seconds.
// Before, the stream's goroutine waited in its write for ever, the stop
// ran out of its 30 s, and Close returned the deadline's error with the
// store still open.
func TestConsoleStalledStreamDoesNotHoldClose(t *testing.T) {
	// No write timeout within the test: only Close can end the stalled
	// write.
	shortConsoleTimes(t, 20*time.Millisecond, time.Hour)
	n := openAdminNode(t, io.Discard)
	stalledStream(t, n)
	began := time.Now()
	if err := n.Close(); err != nil {
		t.Fatalf("close with a stalled event stream: %v after %v", err, time.Since(began))
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("close took %v with a stalled event stream", took)
	}
	if err := n.Store().Sync(context.Background()); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("the store after Close: %v, want closed", err)
	}
}

// A reader that stops reading is dropped once a write waited its write
// timeout, counted in petrel_console_streams_dropped_total, while the
// node runs on.
func TestConsoleStalledStreamDropped(t *testing.T) {
	shortConsoleTimes(t, 20*time.Millisecond, 300*time.Millisecond)
	n := openAdminNode(t, io.Discard)
	busyQueues(t, n)
	if _, _, resp := openStream(t, n, "page=queues", 4096); resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %s", resp.Status)
	}
	petreltest.Eventually(t, "the stalled stream dropped", func() bool {
		return adminMetric(t, n, "petrel_console_streams_dropped_total") == 1 &&
			adminMetric(t, n, "petrel_console_streams") == 0
	})
}
