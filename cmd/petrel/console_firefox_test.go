package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// The console in Firefox: Debian's firefox-esr, headless, driven over
// Marionette, its own remote protocol (a TCP stream of length-prefixed
// JSON), which needs no driver binary and no library. Opt-in, since CI
// installs Chromium only:
//
//	PETREL_FIREFOX=1 go test -run TestConsoleInFirefox ./cmd/petrel
//
// PETREL_FIREFOX_PATH names another Firefox than /usr/bin/firefox-esr.

// marionette is a session of Firefox's remote protocol.
type marionette struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	id   int
}

// startFirefox starts headless Firefox on a new profile that has
// Marionette listen on a free port, and returns a session; the cleanup
// ends Firefox.
func startFirefox(t *testing.T) *marionette {
	t.Helper()
	bin := os.Getenv("PETREL_FIREFOX_PATH")
	if bin == "" {
		bin = "/usr/bin/firefox-esr"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("PETREL_FIREFOX is set but there is no Firefox at %s (%v): apt-get install firefox-esr, or set PETREL_FIREFOX_PATH", bin, err)
	}
	home := t.TempDir()
	profile := filepath.Join(home, "profile")
	if err := os.Mkdir(profile, 0o700); err != nil {
		t.Fatal(err)
	}
	// Port 0: Marionette takes a free port and writes it in the profile.
	writeFile(t, filepath.Join(profile, "user.js"), `user_pref("marionette.port", 0);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("app.update.disabledForTesting", true);
user_pref("network.captive-portal-service.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
`)
	var out bytes.Buffer
	cmd := exec.Command(bin, "--headless", "--marionette", "--no-remote", "--profile", profile, "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+home, "MOZ_CRASHREPORTER_DISABLE=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var port int
	petreltest.Eventually(t, "Firefox's Marionette port", func() bool {
		b, err := os.ReadFile(filepath.Join(profile, "MarionetteActivePort"))
		port, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && port > 0
	}, func() string { return out.String() })
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	m := &marionette{t: t, conn: conn, r: bufio.NewReader(conn)}
	t.Cleanup(func() {
		// Quit ends Firefox; the cleanup above waits for it.
		_, _ = m.call("Marionette:Quit", map[string]any{})
		conn.Close()
	})
	var hello struct {
		Protocol int `json:"marionetteProtocol"`
	}
	if err := m.read(&hello); err != nil || hello.Protocol != 3 {
		t.Fatalf("Marionette hello: %+v %v", hello, err)
	}
	m.must("WebDriver:NewSession", map[string]any{}, nil)
	return m
}

// read reads one message: its length in decimal, a colon, its JSON.
func (m *marionette) read(v any) error {
	m.conn.SetReadDeadline(time.Now().Add(actionTimeout))
	n, err := m.r.ReadString(':')
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(strings.TrimSuffix(n, ":"))
	if err != nil || size < 0 || size > 64<<20 {
		return fmt.Errorf("bad Marionette frame length %q", n)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(m.r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// call sends the command [0, id, name, params] and returns its result,
// from the answer [1, id, error, result].
func (m *marionette) call(name string, params any) (json.RawMessage, error) {
	m.id++
	b, err := json.Marshal([]any{0, m.id, name, params})
	if err != nil {
		return nil, err
	}
	m.conn.SetWriteDeadline(time.Now().Add(actionTimeout))
	if _, err := fmt.Fprintf(m.conn, "%d:%s", len(b), b); err != nil {
		return nil, err
	}
	for {
		var msg []json.RawMessage
		if err := m.read(&msg); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var id int
		if len(msg) != 4 || json.Unmarshal(msg[1], &id) != nil || id != m.id {
			continue // not our answer
		}
		if string(msg[2]) != "null" {
			return nil, fmt.Errorf("%s: %s", name, msg[2])
		}
		return msg[3], nil
	}
}

// must calls name and decodes its result's value into out, if not nil.
func (m *marionette) must(name string, params, out any) {
	m.t.Helper()
	res, err := m.call(name, params)
	if err != nil {
		m.t.Fatal(err)
	}
	if out != nil {
		var v struct{ Value json.RawMessage }
		if err := json.Unmarshal(res, &v); err != nil {
			m.t.Fatalf("%s: %v in %s", name, err, res)
		}
		if err := json.Unmarshal(v.Value, out); err != nil {
			m.t.Fatalf("%s: %v in %s", name, err, res)
		}
	}
}

func (m *marionette) navigate(url string) {
	m.t.Helper()
	m.must("WebDriver:Navigate", map[string]any{"url": url}, nil)
}

func (m *marionette) url() string {
	m.t.Helper()
	var u string
	m.must("WebDriver:GetCurrentURL", map[string]any{}, &u)
	return u
}

// eval runs the body of a function in the page and returns its result.
func (m *marionette) eval(script string, out any) {
	m.t.Helper()
	m.must("WebDriver:ExecuteScript", map[string]any{"script": script, "args": []any{}}, out)
}

// text returns the text of the first element matching sel, "" if none.
func (m *marionette) text(sel string) string {
	m.t.Helper()
	var s string
	m.eval(fmt.Sprintf(`var e = document.querySelector(%q); return e ? e.textContent.trim() : "";`, sel), &s)
	return s
}

func (m *marionette) waitText(what, sel string, ok func(string) bool) {
	m.t.Helper()
	var last string
	petreltest.Eventually(m.t, what, func() bool { last = m.text(sel); return ok(last) },
		func() string { return fmt.Sprintf("%s reads %q", sel, last) })
}

// element finds the element sel and returns its reference.
func (m *marionette) element(sel string) map[string]any {
	m.t.Helper()
	var ref map[string]any
	m.must("WebDriver:FindElement", map[string]any{"using": "css selector", "value": sel}, &ref)
	return ref
}

func elementID(ref map[string]any) string {
	for _, v := range ref {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return ""
}

func (m *marionette) screenshot(dir, name string) {
	m.t.Helper()
	var b64 string
	m.must("WebDriver:TakeScreenshot", map[string]any{"full": true}, &b64)
	png, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		m.t.Fatalf("screenshot %s: not a PNG (%v)", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		m.t.Fatal(err)
	}
	m.t.Logf("screenshot %s", path)
}

func TestConsoleInFirefox(t *testing.T) {
	if os.Getenv("PETREL_FIREFOX") == "" {
		t.Skip("set PETREL_FIREFOX=1 to run the console in Debian's firefox-esr (not installed by CI)")
	}
	shots := screenshotDir(t)
	cl := startConsoleCluster(t)
	ff := startFirefox(t)

	// The login is required, and the form works: Firefox keeps the
	// Secure cookie over http://127.0.0.1.
	ff.navigate(cl.base + "/queues")
	if u := ff.url(); u != cl.base+"/login" {
		t.Fatalf("without a session /queues led to %s, want the login form", u)
	}
	ff.must("WebDriver:ElementSendKeys", map[string]any{"id": elementID(ff.element("#token")), "text": testAdminToken}, nil)
	ff.must("WebDriver:ElementClick", map[string]any{"id": elementID(ff.element("#login"))}, nil)
	petreltest.Eventually(t, "the network page after the login", func() bool { return ff.url() == cl.base+"/" },
		func() string { return "at " + ff.url() + ": " + ff.text("body") })

	// The script runs under the CSP and its event stream connects.
	ff.waitText("the live updates on", "#conn", func(s string) bool { return s == "live: on" })
	cl.send(t, "orders@b", "hello b")
	ff.waitText("the link to b shown up", `tr[data-link="b"] .state`, func(s string) bool { return strings.Contains(s, "up") })

	// A queue's depth rises as the event stream redraws the page.
	ff.navigate(cl.base + "/queues")
	for i := range 5 {
		cl.send(t, "work", fmt.Sprintf("job %d", i))
	}
	ff.waitText("work's depth at 5", `tr[data-queue="work"] .depth`, func(s string) bool { return atoi(s) == 5 })
	ff.screenshot(shots, "firefox-queues")

	// A change needs the CSRF token: without it 403, with it 200.
	purge := func(withCSRF bool) int {
		var status int
		headers := `{'Content-Type': 'application/json'}`
		if withCSRF {
			headers = `{'Content-Type': 'application/json', 'X-CSRF-Token': document.querySelector('meta[name="csrf-token"]').content}`
		}
		ff.must("WebDriver:ExecuteAsyncScript", map[string]any{"args": []any{}, "script": `var done = arguments[arguments.length - 1];
fetch('/api/queues/work/purge', {method: 'POST', credentials: 'same-origin', headers: ` + headers + `, body: '{}'})
  .then(function (r) { done(r.status); }, function () { done(-1); });`}, &status)
		return status
	}
	if st := purge(false); st != http.StatusForbidden {
		t.Fatalf("a purge without the CSRF token answered %d, want 403", st)
	}
	if st := purge(true); st != http.StatusOK {
		t.Fatalf("a purge with the CSRF token answered %d, want 200", st)
	}
	ff.waitText("work's depth at 0 after the purge", `tr[data-queue="work"] .depth`, func(s string) bool { return atoi(s) == 0 })
}
