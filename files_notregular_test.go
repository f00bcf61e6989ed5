//go:build unix

package petrel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// A named pipe given as a file to send is refused at once, with what it
// is, wherever it is given: open(2) of a pipe blocks until a writer
// comes, and a node that blocked there would hold the caller, then take
// its whole stop timeout to close.

// mkfifo makes a named pipe at path, released when the test ends (see
// releasePipe).
func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	releasePipe(t, path)
	return path
}

// releasePipe opens the named pipe at path for writing once when the test
// ends, before the nodes it opened earlier close: that lets an open for
// reading blocked on it return, so that a test that fails because the
// node blocked does not also hang its cleanup.
func releasePipe(t *testing.T, path string) {
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close() // ENXIO otherwise: no reader waits
		}
	})
}

// promptly runs f and returns its error, failing the test if f has not
// returned after 10 s: long for a refusal, and short of the node's 30 s
// stop timeout that a blocked open runs into (a named pipe with no writer
// holds a blocking open for ever).
func promptly(t *testing.T, what string, f func() error) error {
	t.Helper()
	return petreltest.Returns(t, what, 10*time.Second, f)
}

// closePromptly closes n, which must stop cleanly and promptly: nothing of
// it may still be blocked on a file.
func closePromptly(t *testing.T, n *petrel.Node) {
	t.Helper()
	if err := promptly(t, "closing node "+n.Name(), n.Close); err != nil {
		t.Fatalf("close node %s: %v", n.Name(), err)
	}
}

// notRegularPipe checks that err refuses path as a named pipe.
func notRegularPipe(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, filetransfer.ErrNotRegular) || !strings.Contains(err.Error(), "a named pipe, not a regular file") ||
		!strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want %s refused as a named pipe (filetransfer.ErrNotRegular)", err, path)
	}
}

// TestAdminSendFileRefusesANamedPipe: POST /api/files of a named pipe
// under admin.file_roots answers 400 at once, as for a directory, and the
// node then stops cleanly.
func TestAdminSendFileRefusesANamedPipe(t *testing.T) {
	roots := t.TempDir()
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Admin.FileRoots = []string{roots}
	}))
	pipe := mkfifo(t, filepath.Join(roots, "pipe"))
	for _, to := range []string{"files", "files@" + n.Name()} {
		code, raw := apiCall(t, n, "POST", adminapi.PathFiles, adminapi.SendFileRequest{Path: pipe, To: to}, nil)
		var e adminapi.ErrorResponse
		if err := json.Unmarshal([]byte(raw), &e); err != nil || code != http.StatusBadRequest ||
			!strings.Contains(e.Error, "a named pipe, not a regular file") || !strings.Contains(e.Error, pipe) {
			t.Fatalf("POST %s to %s: %d %s; want 400 naming the pipe", adminapi.PathFiles, to, code, raw)
		}
	}
	closePromptly(t, n)
}

// TestSendRefusesANamedPipe: Producer.Send of a file message whose
// SendFilePath is a named pipe fails at once with the reason, for an
// address of this node (the file is read to be copied here) as for one of
// another node (it is read to be hashed and sent).
func TestSendRefusesANamedPipe(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}
	}))
	pipe := mkfifo(t, filepath.Join(t.TempDir(), "pipe"))
	p := n.Producer()
	for _, to := range []string{"files", "files@b"} {
		m := p.CreateFileMessage(to)
		m.File.SendFilePath = pipe
		err := promptly(t, "Send to "+to, func() error { return p.Send(context.Background(), m) })
		notRegularPipe(t, err, pipe)
	}
	for _, st := range n.QueueStats() {
		if st.Depth != 0 {
			t.Fatalf("queue %s holds %d messages: nothing should have been stored", st.Name, st.Depth)
		}
	}
	closePromptly(t, n)
}

// TestSendRefusesAFileReplacedByANamedPipe: a file that becomes a named
// pipe after Send described it, and before Send hashes it (its transfer
// already stored, its checksum to follow), fails Send at once, and the
// node stops cleanly.
func TestSendRefusesAFileReplacedByANamedPipe(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}
	}))
	path, _ := writeRandom(t, t.TempDir(), "report.csv", 100000)
	releasePipe(t, path)
	petrel.SetHashHook(n, func(*message.Message) {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Error(err)
		}
	})
	p := n.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = path
	err := promptly(t, "Send", func() error { return p.Send(context.Background(), m) })
	notRegularPipe(t, err, path)
	closePromptly(t, n)
}

// TestOutboxMovesANamedPipeToFailed: a named pipe in an outbox folder, there
// at start or dropped in later, goes to failed/ with its reason, and the
// outbox goes on sending the files that come after it. One outbox sends
// to another node (the file is described from a stat, then hashed), one
// to an address of its own node (the file is opened at once, to copy it).
func TestOutboxMovesANamedPipeToFailed(t *testing.T) {
	remote, local := t.TempDir(), t.TempDir()
	mkfifo(t, filepath.Join(remote, "early.pipe"))
	mkfifo(t, filepath.Join(local, "early.pipe"))
	a, b, _ := outboxPair(t, func(*petrel.Node) []petrel.OutboxConfig {
		return []petrel.OutboxConfig{
			{Dir: remote, To: "files@b", Quiet: 100 * time.Millisecond},
			{Dir: local, To: "here", Quiet: 100 * time.Millisecond},
		}
	})
	for _, dir := range []string{remote, local} {
		releasePipe(t, filepath.Join(dir, "early.pipe")) // again, before the nodes close
		mkfifo(t, filepath.Join(dir, "late.pipe"))
	}
	for _, dir := range []string{remote, local} {
		for _, name := range []string{"early.pipe", "late.pipe"} {
			reason := filepath.Join(dir, "failed", name+".reason")
			petreltest.Eventually(t, reason, func() bool {
				_, err := os.Stat(reason)
				return err == nil
			}, func() string { return fmt.Sprint(os.ReadDir(dir)) })
			why, _ := os.ReadFile(reason)
			if !strings.Contains(string(why), "a named pipe, not a regular file") {
				t.Fatalf("%s says %q", reason, why)
			}
			if fi, err := os.Lstat(filepath.Join(dir, "failed", name)); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
				t.Fatalf("%s/failed/%s: %v %v", dir, name, fi, err)
			}
		}
	}
	_, sum := writeRandom(t, remote, "after.bin", 5000)
	if d := receiveFile(t, b, "files", 30*time.Second); d.File.Filename != "after.bin" || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
	_, sum = writeRandom(t, local, "here.bin", 5000)
	if d := receiveFile(t, a, "here", 30*time.Second); d.File.Filename != "here.bin" || fileSum(t, d.File.ReceivedFilePath) != sum {
		t.Fatalf("received %+v", d.File)
	}
	closePromptly(t, a)
}
