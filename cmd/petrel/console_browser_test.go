package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// The console is tested in a real headless Chromium against real `petrel
// node` processes: a, whose console is under test, and its neighbour b,
// reached through a slow TCP proxy so that a file stays in flight long
// enough to watch its progress bar.

// chromiumPath is Debian's chromium; PETREL_CHROMIUM names another.
func chromiumPath(t *testing.T) string {
	p := os.Getenv("PETREL_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the console's browser tests need Chromium at %s (%v): install Debian's chromium package "+
			"(apt-get install chromium; .ci/run does), or set PETREL_CHROMIUM to a Chromium binary", p, err)
	}
	return p
}

// screenshotDir is where the tests write screenshots: PETREL_SCREENSHOTS,
// or a temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PETREL_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// newBrowser starts headless Chromium with a new empty profile and returns
// a tab's context; the cleanup stops it.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// consoleCluster is node a, with its console, and its neighbour b.
type consoleCluster struct {
	dir, admin, base string
	api              *adminapi.Client
	b                *nodeProc
	// bBase is b's console: the browser's session cookie, for the host
	// 127.0.0.1 whatever the port, is good there too (same token).
	bBase string
}

func startConsoleCluster(t *testing.T) *consoleCluster {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	writeFile(t, tokenFile, testAdminToken+"\n")
	bPort := freePort(t)
	writeFile(t, filepath.Join(dir, "b.yaml"), fmt.Sprintf(`node: {name: b, data_dir: %s}
listen: "127.0.0.1:%d"
admin:
  listen: "127.0.0.1:0"
  token_file: %s
addresses:
  - {name: orders}
`, filepath.Join(dir, "b"), bPort, tokenFile))
	cl := &consoleCluster{dir: dir}
	cl.b = startNode(t, dir, "-c", filepath.Join(dir, "b.yaml"))
	cl.bBase = "http://" + cl.b.ready(t)["admin"]
	// 2 MB/s: a 24 MiB file takes about 12 s.
	proxy := petreltest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", bPort), petreltest.Pace(2<<20, 0))
	writeFile(t, filepath.Join(dir, "a.yaml"), fmt.Sprintf(`node: {name: a, data_dir: %s}
listen: "127.0.0.1:0"
admin:
  listen: "127.0.0.1:0"
  token_file: %s
nodes:
  - {name: b, connector: "tcp://%s"}
files:
  chunk_size: 64KiB
  window: 4
addresses:
  - {name: work}
  - {name: jobs, max_deliveries: 1}
  - {name: telemetry, role: relay}
topics:
  - {pattern: "alerts.#", max_queued_messages: 2}
`, filepath.Join(dir, "a"), tokenFile, proxy.Addr()))
	f := startNode(t, dir, "-c", filepath.Join(dir, "a.yaml")).ready(t)
	cl.admin = f["admin"]
	cl.base = "http://" + cl.admin
	cl.api = adminapi.Dial(cl.admin, testAdminToken)
	t.Cleanup(cl.api.Close)
	return cl
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func (cl *consoleCluster) send(t *testing.T, to, text string) {
	t.Helper()
	var resp adminapi.SendResponse
	if err := cl.api.Do(context.Background(), http.MethodPost, adminapi.PathSend, adminapi.SendRequest{To: to, Text: &text}, &resp); err != nil {
		t.Fatalf("send to %s: %v", to, err)
	}
}

func (cl *consoleCluster) recv(t *testing.T, req adminapi.RecvRequest) int {
	t.Helper()
	var resp adminapi.RecvResponse
	if err := cl.api.Do(context.Background(), http.MethodPost, adminapi.PathRecv, req, &resp); err != nil {
		t.Fatalf("recv from %s: %v", req.Address, err)
	}
	return len(resp.Messages)
}

// text returns the text of the first element matching sel, "" if none.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?e.textContent:""})()`, sel)
	s, err := runTab(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitText waits until the text of sel satisfies ok, as the page's event
// stream redraws it.
func waitText(t *testing.T, ctx context.Context, what, sel string, ok func(string) bool) string {
	t.Helper()
	var last string
	petreltest.Eventually(t, what, func() bool {
		last = text(t, ctx, sel)
		return ok(last)
	}, func() string { return fmt.Sprintf("%s reads %q", sel, last) })
	return last
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := runTab(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// fetchStatus makes the page fetch url by POST with body, and the CSRF
// token when withCSRF, and returns the answer's status.
func fetchStatus(t *testing.T, ctx context.Context, url, body string, withCSRF bool) int {
	t.Helper()
	headers := `{'Content-Type':'application/json'}`
	if withCSRF {
		headers = `{'Content-Type':'application/json','` + console.CSRFHeader + `':document.querySelector('meta[name="csrf-token"]').content}`
	}
	js := fmt.Sprintf(`fetch(%q,{method:'POST',credentials:'same-origin',headers:%s,body:%q}).then(function(r){return r.status})`, url, headers, body)
	status, err := runTab(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch %s: %v", url, err)
	}
	return status
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return -1
	}
	return n
}

func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; without -short")
	}
	shots := screenshotDir(t)
	cl := startConsoleCluster(t)
	ctx := newBrowser(t)

	// The login is required: every page sends to the login form, and the
	// API refuses the browser without its cookie.
	if err := do(ctx, chromedp.Navigate(cl.base+"/queues")); err != nil {
		t.Fatal(err)
	}
	loc := location(t, ctx)
	if !strings.HasSuffix(loc, "/login") {
		t.Fatalf("without a session /queues led to %s, want the login form", loc)
	}
	screenshot(t, ctx, shots, "login")
	if st := fetchStatus(t, ctx, "/api/queues/work/purge", "{}", false); st != http.StatusUnauthorized {
		t.Fatalf("a purge before the login answered %d, want 401", st)
	}
	if err := do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token-at-all"),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(".error")),
	); err != nil {
		t.Fatalf("wrong token: %v; the page at %s reads %q", err, location(t, ctx), text(t, ctx, "body"))
	}
	if err := do(ctx,
		chromedp.SetValue(chromedp.CSS("#token"), testAdminToken),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#live")),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	loc = location(t, ctx)
	if loc != cl.base+"/" {
		t.Fatalf("after the login the browser is at %s", loc)
	}

	// The network: the link to b comes up once a is sending to b.
	cl.send(t, "orders@b", "hello b")
	waitText(t, ctx, "the link to b shown up", `tr[data-link="b"] .state`, func(s string) bool { return strings.Contains(s, "up") })
	if err := do(ctx, chromedp.Click(chromedp.CSS(`tr[data-link="b"] a`)), chromedp.WaitVisible(chromedp.CSS("#detail"))); err != nil {
		t.Fatalf("open the link's detail: %v", err)
	}
	waitText(t, ctx, "the link's detail", "#detail .lasterror", func(s string) bool { return s != "" })
	screenshot(t, ctx, shots, "network")

	// A queue's depth rises and falls, as its live row shows.
	if err := do(ctx, chromedp.Navigate(cl.base+"/queues"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		cl.send(t, "work", fmt.Sprintf("job %d", i))
	}
	waitText(t, ctx, "work's depth at 20", `tr[data-queue="work"] .depth`, func(s string) bool { return atoi(s) == 20 })
	// A dead letter for the DLQ page: jobs takes one delivery.
	cl.send(t, "jobs", `{"job": 7, "input": "malformed"}`)
	if n := cl.recv(t, adminapi.RecvRequest{Address: "jobs", Settle: adminapi.SettleNack, Reason: "input does not parse"}); n != 1 {
		t.Fatalf("recv jobs took %d messages", n)
	}
	waitText(t, ctx, "jobs.dlq listed", `tr[data-queue="jobs.dlq"] .depth`, func(s string) bool { return atoi(s) == 1 })
	// a relays telemetry: its queue toward b reads relay, orders@b send.
	cl.send(t, "telemetry@b", "relayed")
	waitText(t, ctx, "the relay queue", `tr[data-queue="telemetry@b"] .kind`, func(s string) bool { return s == "relay to b" })
	waitText(t, ctx, "the send queue", `tr[data-queue="orders@b"] .kind`, func(s string) bool { return s == "send to b" })
	screenshot(t, ctx, shots, "queues")
	if n := cl.recv(t, adminapi.RecvRequest{Address: "work", Count: 20}); n != 20 {
		t.Fatalf("recv work took %d messages", n)
	}
	waitText(t, ctx, "work's depth back to 0", `tr[data-queue="work"] .depth`, func(s string) bool { return atoi(s) == 0 })
	// A durable subscription nobody consumes holds its space's bound, and
	// the page says how many copies it dropped.
	var sub adminapi.RecvResponse
	if err := cl.api.Do(context.Background(), http.MethodPost, adminapi.PathSubscribe, adminapi.SubscribeRequest{Pattern: "alerts.#", Name: "pager", Wait: time.Millisecond}, &sub); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for i := range 5 {
		cl.send(t, "alerts.disk", fmt.Sprintf("alert %d", i))
	}
	waitText(t, ctx, "pager holds 2", `tr[data-sub="pager"] .depth`, func(s string) bool { return atoi(s) == 2 })
	waitText(t, ctx, "pager dropped 3", `tr[data-sub="pager"] .dropped`, func(s string) bool { return atoi(s) == 3 })
	if got := text(t, ctx, `tr[data-sub="pager"] .bound`); got != "2" {
		t.Fatalf("pager's bound reads %q, want 2", got)
	}

	// A request of the page's session without the CSRF token is refused;
	// with it, it passes.
	if st := fetchStatus(t, ctx, "/api/queues/work/purge", "{}", false); st != http.StatusForbidden {
		t.Fatalf("a purge without the CSRF token answered %d, want 403", st)
	}
	if st := fetchStatus(t, ctx, "/api/queues/work/purge", "{}", true); st != http.StatusOK {
		t.Fatalf("a purge with the CSRF token answered %d, want 200", st)
	}

	// The DLQ: its message with its reason, replayed from the page.
	if err := do(ctx, chromedp.Navigate(cl.base+"/queues/jobs.dlq"), chromedp.WaitVisible(chromedp.CSS(".msg"))); err != nil {
		t.Fatal(err)
	}
	if r := text(t, ctx, ".msg .reason"); !strings.Contains(r, "input does not parse") {
		t.Fatalf("the dead letter's reason reads %q", r)
	}
	waitText(t, ctx, "jobs.dlq's depth at 1", ".stats .depth", func(s string) bool { return atoi(s) == 1 })
	screenshot(t, ctx, shots, "queue-dlq")
	if err := do(ctx, chromedp.Click(chromedp.CSS(`.msg button[name="one"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the replay's result", "#result", func(s string) bool { return strings.Contains(s, "Replayed 1") })
	waitText(t, ctx, "jobs.dlq's depth at 0", ".stats .depth", func(s string) bool { return atoi(s) == 0 })
	if n := cl.recv(t, adminapi.RecvRequest{Address: "jobs"}); n != 1 {
		t.Fatalf("the replayed message is not back in jobs (recv took %d)", n)
	}

	// A selection, then all: two more dead letters.
	cl.send(t, "jobs", "second")
	cl.send(t, "jobs", "third")
	if n := cl.recv(t, adminapi.RecvRequest{Address: "jobs", Count: 2, Settle: adminapi.SettleNack, Reason: "rejected"}); n != 2 {
		t.Fatalf("recv jobs took %d messages, want 2", n)
	}
	if err := do(ctx, chromedp.Navigate(cl.base+"/queues/jobs.dlq"), chromedp.WaitVisible(chromedp.CSS(".msg"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "jobs.dlq's depth at 2", ".stats .depth", func(s string) bool { return atoi(s) == 2 })
	if err := do(ctx, chromedp.Click(chromedp.CSS("#sel-0")), chromedp.Click(chromedp.CSS("#replay-selected"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the selection's replay", "#result", func(s string) bool { return strings.Contains(s, "Replayed 1") })
	waitText(t, ctx, "jobs.dlq's depth at 1", ".stats .depth", func(s string) bool { return atoi(s) == 1 })
	if err := do(ctx, chromedp.Click(chromedp.CSS("#replay-all"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "jobs.dlq's depth at 0 after replay all", ".stats .depth", func(s string) bool { return atoi(s) == 0 })
	if n := cl.recv(t, adminapi.RecvRequest{Address: "jobs", Count: 2}); n != 2 {
		t.Fatalf("the replayed messages are not back in jobs (recv took %d)", n)
	}

	// A test message sent from a queue's page, then a purge behind its
	// confirmation.
	if err := do(ctx, chromedp.Navigate(cl.base+"/queues/work"), chromedp.WaitVisible(chromedp.CSS("#send")),
		chromedp.SetValue(chromedp.CSS("#send-text"), "sent from the page"),
		chromedp.Click(chromedp.CSS("#send"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the send's result", "#result", func(s string) bool { return strings.Contains(s, "Sent message") })
	waitText(t, ctx, "work's depth at 1", ".stats .depth", func(s string) bool { return atoi(s) == 1 })
	waitText(t, ctx, "the message listed", ".msg .body", func(s string) bool { return s == "sent from the page" })
	// The age of the queue's oldest message shows, once it is a second old.
	waitText(t, ctx, "the oldest message's age", ".stats .oldest", func(s string) bool { return strings.HasSuffix(s, " old") })
	if err := do(ctx, chromedp.Click(chromedp.CSS("details.purge summary")), chromedp.WaitVisible(chromedp.CSS("#purge")),
		chromedp.Click(chromedp.CSS("#purge"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the purge's result", "#result", func(s string) bool { return strings.Contains(s, "Purged 1") })
	waitText(t, ctx, "work's depth at 0 after the purge", ".stats .depth", func(s string) bool { return atoi(s) == 0 })

	// A file in flight: its progress bar advances.
	src := filepath.Join(cl.dir, "big.bin")
	writeRandom(t, src, 24<<20)
	r := runPetrel(t, time.Minute, "sendfile", src, "orders@b", "-c", filepath.Join(cl.dir, "a.yaml"), "--no-wait")
	r.wantCode(t, 0)
	if err := do(ctx, chromedp.Navigate(cl.base+"/transfers"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	progress := func() int {
		js := `(function(){var p=document.querySelector('tr[data-file] progress');return p?p.value:-1})()`
		v, err := runTab(ctx, chromedp.Evaluate[float64](js))
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	var first int
	petreltest.Eventually(t, "the file's progress bar", func() bool { first = progress(); return first > 0 })
	var later int
	petreltest.Eventually(t, "the progress bar advancing", func() bool { later = progress(); return later > first },
		func() string { return fmt.Sprintf("first %d, now %d", first, later) })
	waitText(t, ctx, "the file's rate", "tr[data-file] td:nth-child(5)", func(s string) bool { return s != "0 B/s" })
	screenshot(t, ctx, shots, "transfers")

	if err := do(ctx, chromedp.Navigate(cl.base+"/node"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, shots, "node")

	// Once whole at b, the file is listed there among the files received
	// in the last hour, and at a among those sent.
	if err := do(ctx, chromedp.Navigate(cl.bBase+"/transfers"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the file received at b", `tr[data-ended="received"]`, func(s string) bool {
		return strings.Contains(s, "big.bin") && strings.Contains(s, "from a") && strings.Contains(s, "delivered")
	})
	screenshot(t, ctx, shots, "transfers-received")
	if err := do(ctx, chromedp.Navigate(cl.base+"/transfers"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the file sent from a", `tr[data-ended="sent"]`, func(s string) bool {
		return strings.Contains(s, "big.bin") && strings.Contains(s, "to b") && strings.Contains(s, "handed over")
	})

	// The link goes down once b stops.
	if err := do(ctx, chromedp.Navigate(cl.base+"/?link=b"), chromedp.WaitVisible(chromedp.CSS("#live"))); err != nil {
		t.Fatal(err)
	}
	cl.b.cmd.Process.Kill()
	<-cl.b.exited
	waitText(t, ctx, "the link to b shown down", `tr[data-link="b"] .state`, func(s string) bool { return strings.Contains(s, "down") })
	waitText(t, ctx, "the link's last error", "#detail .lasterror", func(s string) bool { return s != "none" })
	screenshot(t, ctx, shots, "network-down")
}

func writeRandom(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		t.Fatal(err)
	}
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := runTab(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// actionTimeout bounds one browser action of the tests.
const actionTimeout = 30 * time.Second

// short derives a context for one action from the tab's, bounded by
// actionTimeout; it ends with the tab's, so nothing leaks.
func short(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, actionTimeout)
}

// runTab runs a in the tab, within actionTimeout.
func runTab[T any](ctx context.Context, a chromedp.Action[T]) (T, error) {
	c, cancel := short(ctx)
	defer cancel()
	return chromedp.Run(c, a)
}

// do runs the steps in the tab, within actionTimeout.
func do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	_, err := runTab(ctx, chromedp.Steps(steps...))
	return err
}

// A node with more neighbours than the graph draws, in Chromium: the names
// drawn on the dense ring do not overlap one another or leave the graph,
// as the browser lays them out, and the note points at the list of the
// others.
func TestConsoleLargeNetworkInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; without -short")
	}
	shots := screenshotDir(t)
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "node: {name: hub, data_dir: %s}\nadmin:\n  listen: \"127.0.0.1:0\"\nnodes:\n", filepath.Join(dir, "hub"))
	for i := range 40 {
		fmt.Fprintf(&cfg, "  - {name: plant-%02d, connector: \"tcp://127.0.0.1:1\"}\n", i)
	}
	writeFile(t, filepath.Join(dir, "hub.yaml"), cfg.String())
	base := "http://" + startNode(t, dir, "-c", filepath.Join(dir, "hub.yaml")).ready(t)["admin"]
	// Two links down, so that their symbols are in the names.
	for _, to := range []string{"orders@plant-07", "orders@plant-31"} {
		runPetrel(t, time.Minute, "send", "-c", filepath.Join(dir, "hub.yaml"), to, "x").wantCode(t, 0)
	}
	ctx := newBrowser(t)
	if err := do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("svg.net.dense"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "plant-31's link drawn down", `g[data-node="plant-31"] text`, func(s string) bool { return strings.HasPrefix(s, "↻") || strings.HasPrefix(s, "▼") })
	// Every name's box, as laid out and turned: none may cross another
	// (the separating axis test of two rectangles, 1px of slack) or the
	// graph's edge.
	js := `(function(){
var svg = document.querySelector('svg.net').getBoundingClientRect();
var boxes = [].map.call(document.querySelectorAll('svg.net g.node text:not(.kind), svg.net .more text'), function(e) {
  var b = e.getBBox(), m = e.getScreenCTM(), p = document.querySelector('svg.net').createSVGPoint();
  var pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(function(c) {
    p.x = c[0]; p.y = c[1]; var q = p.matrixTransform(m); return [q.x, q.y];
  });
  return {n: e.textContent, pts: pts};
});
function apart(a, b) {
  return [a, b].some(function(poly) {
    return poly.pts.some(function(p, i) {
      var q = poly.pts[(i + 1) % 4], ax = q[1] - p[1], ay = p[0] - q[0], len = Math.hypot(ax, ay) || 1;
      var pa = a.pts.map(function(v) { return (v[0] * ax + v[1] * ay) / len; });
      var pb = b.pts.map(function(v) { return (v[0] * ax + v[1] * ay) / len; });
      return Math.max.apply(null, pa) - 1 <= Math.min.apply(null, pb) || Math.max.apply(null, pb) - 1 <= Math.min.apply(null, pa);
    });
  });
}
var bad = [];
boxes.forEach(function(a, i) {
  a.pts.forEach(function(v) {
    if (v[0] < svg.left - 1 || v[1] < svg.top - 1 || v[0] > svg.right + 1 || v[1] > svg.bottom + 1) { bad.push(a.n + ' leaves the graph'); }
  });
  boxes.slice(i + 1).forEach(function(b) { if (!apart(a, b)) { bad.push(a.n + ' overlaps ' + b.n); } });
});
return JSON.stringify({names: boxes.length, bad: bad});
})()`
	out, err := runTab(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Names int
		Bad   []string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// This node, 36 neighbours, the note.
	if got.Names != 38 || len(got.Bad) > 0 {
		t.Fatalf("%d names drawn (want 38); %v", got.Names, got.Bad)
	}
	if s := text(t, ctx, "#not-drawn"); s != "Not drawn (4)" {
		t.Fatalf("the list of the nodes not drawn is titled %q", s)
	}
	screenshot(t, ctx, shots, "network-large")
}
