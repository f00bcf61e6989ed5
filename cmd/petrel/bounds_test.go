//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
)

const (
	idleConns  = 5000
	idleSource = 10        // loopback addresses the idle connections come from
	rssCeiling = 150 << 20 // bytes; generous: measured far below, see the README
)

// TestIdleConnectionsBounded holds 5,000 idle, unauthenticated TCP
// connections to a `petrel node` process, from ten addresses, as a host
// flooding its listener would. The node must close those past its bounds
// at once, stay under a bounded RSS, log the rejections a few times rather
// than once each, and still link with a real peer and take its message
// while they are held open.
func TestIdleConnectionsBounded(t *testing.T) {
	raiseFileLimit(t, idleConns+1000)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.yaml"),
		"node: {name: b, data_dir: b}\nlisten: 127.0.0.1:0\nstore: {sync: normal}\naddresses: [{name: orders}]\nlog: {level: info}\n"+
			"link: {handshake_timeout: 15s}\n") // longer than opening the 5,000 takes, even under the race detector
	b := startNode(t, dir, "-c", filepath.Join(dir, "b.yaml"))
	listen := b.ready(t)["listen"]
	pid := b.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")

	var admitted []net.Conn
	for i := range idleConns {
		nc := idleDial(t, listen, fmt.Sprintf("127.0.0.%d", 2+i%idleSource))
		if nc != nil {
			admitted = append(admitted, nc)
		}
	}
	held, peak := procStatus(t, pid, "VmRSS"), procStatus(t, pid, "VmHWM")
	t.Logf("node RSS: %d MiB before, %d MiB with %d idle connections held (%d in their handshake, the rest closed at accept); peak %d MiB",
		before>>20, held>>20, idleConns, len(admitted), peak>>20)
	if want := idleSource * 16; len(admitted) != want {
		t.Errorf("%d connections admitted to their handshake, want %d (16 per address)", len(admitted), want)
	}

	a, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://" + listen}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := a.Producer().CreateDataMessage("orders@b")
	m.Body = []byte("through the flood")
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, a, 10*time.Second)
	after := procStatus(t, pid, "VmRSS")
	t.Logf("node RSS after the peer linked and delivered: %d MiB", after>>20)
	if !slices.Contains(buildFlags, "-race") && max(held, after) > rssCeiling {
		t.Errorf("node RSS %d MiB with %d idle connections, want under %d MiB", max(held, after)>>20, idleConns, rssCeiling>>20)
	}

	// The idle connections in their handshake time out, and are closed.
	for _, nc := range admitted {
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("an idle connection was not closed at the handshake timeout: %v", err)
		}
	}

	b.stop(t)
	stderr := b.stderr.String()
	rejected, timedOut := strings.Count(stderr, "connection rejected"), strings.Count(stderr, "link refused at handshake")
	t.Logf("%d log lines for %d connections rejected at accept, %d for %d handshakes timed out",
		rejected, idleConns-len(admitted), timedOut, len(admitted))
	if rejected < 1 || rejected > 3 || timedOut < 1 || timedOut > 3 {
		t.Errorf("%d log lines about rejected connections and %d about failed handshakes, want 1 to 3 each (at most one every 10s)\n%s",
			rejected, timedOut, stderr)
	}
}

// raiseFileLimit raises this process's soft limit of open files to at
// least n, which the node started after inherits, or skips the test.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("the hard limit of open files is %d; the test needs %d", lim.Max, n)
	}
	old := lim
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// idleDial connects from the loopback address from and sends nothing. It
// returns the connection, held open until the test ends, if the node began
// its handshake (it sent its Hello), or nil if it closed it at once.
func idleDial(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err = nc.Read(b[:])
	var ne net.Error
	switch {
	case err == nil:
		return nc
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return nil
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the node neither greeted nor closed a connection from %s", from)
	}
	t.Fatalf("read from the node: %v", err)
	return nil
}

// procStatus returns a size field of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", field, err)
		}
		return kb << 10
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// waitAcked waits until a's link has had a message acknowledged.
func waitAcked(t *testing.T, a *petrel.Node, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, l := range a.Links() {
			if l.Acked > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer's message was not acknowledged within %v: %+v", within, a.Links())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
