//go:build linux

package petrel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// listeningFD is this process's descriptor of the TCP socket listening
// on addr: the inode /proc/net/tcp gives it, found among /proc/self/fd.
func listeningFD(t *testing.T, addr string) int {
	t.Helper()
	ap, err := netip(addr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == ap && fs[3] == "0A" { // 0A: LISTEN
			inode = fs[9]
		}
	}
	if inode == "" {
		t.Fatalf("no socket listening on %s in /proc/net/tcp", addr)
	}
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", de.Name())); l == "socket:["+inode+"]" {
			fd, _ := strconv.Atoi(de.Name())
			return fd
		}
	}
	t.Fatalf("no descriptor of socket %s (%s)", inode, addr)
	return -1
}

// netip is addr, an IPv4 host:port, as /proc/net/tcp writes it.
func netip(addr string) (string, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return "", err
	}
	ip := ta.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port), nil
}

// An MQTT listener whose socket fails for good (shut down under it:
// accept returns EINVAL, which is no error that passes) makes the node
// not ready: /readyz answers 503 with the reason, which petrel stat shows
// too, and an error is logged. Before, mochi's listener returned at the
// first Accept error, EMFILE included, and the node stayed ready with its
// MQTT port queueing connections that nothing accepted.
func TestReadyzSaysAnMQTTListenerStopped(t *testing.T) {
	n, body, logs := stopListener(t, Config{MQTT: MQTTConfig{Listen: "127.0.0.1:0"}}, (*Node).MQTTAddr)
	want := "not ready: mqtt listener mqtt on " + n.MQTTAddr() + " stopped accepting connections: "
	if !strings.HasPrefix(body, want) {
		t.Fatalf("/readyz says %q, want it to start %q", body, want)
	}
	t.Logf("/readyz: %s", body)
	if st := n.Status().MQTT; st == nil || !strings.HasPrefix(st.ListenerError, want[len("not ready: "):]) {
		t.Fatalf("status: %+v", st)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("nothing logged as an error:\n%s", logs)
	}
}

// The link listener's socket failing for good makes the node not ready
// too, with the reason, and an error logged. Before, its accept loop
// retried every error once a second for ever, logging each, with the
// node still ready.
func TestReadyzSaysTheLinkListenerStopped(t *testing.T) {
	n, body, logs := stopListener(t, Config{Listen: "127.0.0.1:0"}, (*Node).ListenAddr)
	want := "not ready: link listener on " + n.ListenAddr() + " stopped accepting connections: "
	if !strings.HasPrefix(body, want) {
		t.Fatalf("/readyz says %q, want it to start %q", body, want)
	}
	if got := strings.Count(logs.String(), "link listener stopped accepting connections"); got != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", got, logs)
	}
}

// stopListener opens a node of cfg with an admin listener, checks it is
// ready, shuts down the socket listening on addr(node) under it (accept
// then returns EINVAL, which is no error that passes), and waits for
// /readyz to answer 503. It returns the node, that answer's body and the
// node's log.
func stopListener(t *testing.T, cfg Config, addr func(*Node) string) (*Node, string, *petreltest.SyncBuffer) {
	t.Helper()
	logs := &petreltest.SyncBuffer{}
	cfg.Name, cfg.DataDir = "a", t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Admin = AdminConfig{Listen: "127.0.0.1:0"}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	readyz := func() (int, string) { return getReadyz(t, n.AdminAddr()) }
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz %d %q before, want 200", code, body)
	}
	if err := syscall.Shutdown(listeningFD(t, addr(n)), syscall.SHUT_RD); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the node not ready", func() bool { code, _ := readyz(); return code == http.StatusServiceUnavailable })
	_, body := readyz()
	return n, body, logs
}

// getReadyz returns the status and the trimmed body of GET /readyz from
// the admin endpoint at addr.
func getReadyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
