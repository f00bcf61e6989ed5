package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeProc is a running `petrel node`.
type nodeProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
	exited chan struct{}
}

// startNode starts `petrel node args...` in dir. The process is killed when
// the test ends, if it is still running.
func startNode(t *testing.T, dir string, args ...string) *nodeProc {
	t.Helper()
	return startNodeCmd(t, dir, exec.Command(petrelBin, append([]string{"node"}, args...)...))
}

// startNodeCmd starts cmd, which runs `petrel node`, in dir, as startNode.
func startNodeCmd(t *testing.T, dir string, cmd *exec.Cmd) *nodeProc {
	t.Helper()
	cmd.Dir = dir
	cmd.Env = petrelEnv
	p := &nodeProc{cmd: cmd, lines: make(chan string, 16), stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// ready waits for the ready line and returns its fields.
func (p *nodeProc) ready(t *testing.T) map[string]string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				t.Fatalf("node exited before it was ready (status %d)\nstderr:\n%s", p.cmd.ProcessState.ExitCode(), p.stderr)
			}
			rest, found := strings.CutPrefix(line, "ready ")
			if !found {
				continue
			}
			fields := map[string]string{}
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				fields[k] = v
			}
			return fields
		case <-timeout:
			t.Fatalf("no ready line within 10s\nstderr:\n%s", p.stderr)
		}
	}
}

// stop sends SIGTERM and returns the exit status.
func (p *nodeProc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		t.Fatalf("node did not exit within 10s of SIGTERM\nstderr:\n%s", p.stderr)
		return -1
	}
}

func TestNodeWithConfig(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "petrel.yaml")
	writeFile(t, cfg, fmt.Sprintf(`node:
  name: test-node
  data_dir: %s
store:
  sync: normal
addresses:
  - name: orders
log:
  level: info
`, dataDir))
	p := startNode(t, dir, "-c", cfg)
	f := p.ready(t)
	if f["node"] != "test-node" || f["data_dir"] != dataDir || len(f["id"]) != 32 {
		t.Errorf("ready line fields %v, want node=test-node data_dir=%s and a 32-digit id", f, dataDir)
	}
	if code := p.stop(t); code != exitOK {
		t.Fatalf("exit status %d after SIGTERM, want 0\nstderr:\n%s", code, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "petrel.db")); err != nil {
		t.Errorf("data directory has no database: %v", err)
	}
}

// A node starts with no configuration file at all, in ./petrel-data.
func TestNodeWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir)
	f := p.ready(t)
	if want := filepath.Join(dir, "petrel-data"); f["data_dir"] != want {
		t.Errorf("data_dir %q, want %q", f["data_dir"], want)
	}
	if code := p.stop(t); code != exitOK {
		t.Fatalf("exit status %d after SIGTERM, want 0\nstderr:\n%s", code, p.stderr)
	}
}

// TestNodeDataDirInUse: a second `petrel node` on the data directory of
// a running one exits at once, saying the directory is in use, and the
// first runs on, its admin socket still answering. Before, both started:
// each delivered what the other leased, gave new messages the same ids,
// and the second took over the first's admin socket.
func TestNodeDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "petrel.yaml")
	writeFile(t, cfg, fmt.Sprintf("node:\n  name: twin\n  data_dir: %s\n", dataDir))
	first := startNode(t, dir, "-c", cfg)
	first.ready(t)
	r := runPetrel(t, 10*time.Second, "node", "-c", cfg)
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stderr, "one node per data directory") || !strings.Contains(r.stderr, dataDir) {
		t.Errorf("the second node's error does not say the data directory is in use:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout, "ready ") {
		t.Errorf("the second node said it was ready:\n%s", r.stdout)
	}
	st := runPetrel(t, 10*time.Second, "stat", "--data-dir", dataDir)
	st.wantCode(t, exitOK)
	if !strings.Contains(st.stdout, "twin") {
		t.Errorf("petrel stat through the first node's socket:\n%s\n%s", st.stdout, st.stderr)
	}
	if code := first.stop(t); code != exitOK {
		t.Fatalf("the first node exited %d after SIGTERM\nstderr:\n%s", code, first.stderr)
	}
	// Once the first is gone, the directory is free again.
	again := startNode(t, dir, "-c", cfg)
	again.ready(t)
	if code := again.stop(t); code != exitOK {
		t.Fatalf("exit status %d\nstderr:\n%s", code, again.stderr)
	}
}

func TestNodeBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		code       int
		where      string // file:line the error must name
	}{
		{"syntax", "node:\n  name: a\n  data_dir: [\n", exitUsage, ":3"},
		{"unknown key", "node:\n  name: a\nstore:\n  synk: full\n", exitUsage, ":4"},
		{"bad value", "store:\n  sync: sometimes\n", exitUsage, ":2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "bad.yaml")
			writeFile(t, cfg, tc.yaml)
			r := runPetrel(t, 10*time.Second, "node", "-c", cfg)
			r.wantCode(t, tc.code)
			if !strings.Contains(r.stderr, cfg+tc.where) {
				t.Errorf("stderr does not name %s%s:\n%s", cfg, tc.where, r.stderr)
			}
			if strings.Contains(r.stderr, "Usage:") {
				t.Errorf("stderr shows usage for a bad file:\n%s", r.stderr)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		r := runPetrel(t, 10*time.Second, "node", "-c", filepath.Join(t.TempDir(), "absent.yaml"))
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, "absent.yaml") {
			t.Errorf("stderr does not name the file:\n%s", r.stderr)
		}
	})
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
