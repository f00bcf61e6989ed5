package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
)

const testAdminToken = "test-admin-token-0123456789"

// lockedNode is a running `petrel node` whose admin listener asks for a
// token and sends files only from outDir.
type lockedNode struct {
	dataDir, admin, tokenFile, outDir, otherDir string
}

// startLockedNode starts the node in a data directory made 0755 before,
// so that the test sees the node close it at start.
func startLockedNode(t *testing.T) lockedNode {
	t.Helper()
	dir := t.TempDir()
	n := lockedNode{
		dataDir: filepath.Join(dir, "data"), tokenFile: filepath.Join(dir, "admin.token"),
		outDir: filepath.Join(dir, "out"), otherDir: filepath.Join(dir, "other"),
	}
	for _, d := range []string{n.dataDir, n.outDir, n.otherDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	writeFile(t, n.tokenFile, testAdminToken+"\n")
	writeFile(t, filepath.Join(n.outDir, "in.txt"), "inside the roots\n")
	writeFile(t, filepath.Join(n.otherDir, "secret.txt"), "outside the roots\n")
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, fmt.Sprintf(`node: {name: a, data_dir: %s}
admin:
  listen: "127.0.0.1:0"
  token_file: %s
  file_roots: [%s]
addresses:
  - {name: orders}
`, n.dataDir, n.tokenFile, n.outDir))
	f := startNode(t, dir, "-c", cfg).ready(t)
	n.admin = f["admin"]
	if n.admin == "" {
		t.Fatalf("ready line has no admin address: %v", f)
	}
	return n
}

// adminRequest makes one request to addr and returns its status, its
// WWW-Authenticate header and its JSON error, if any.
func adminRequest(t *testing.T, method, addr, path string, header map[string]string, body string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct{ Error string }
	json.Unmarshal(raw, &e)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), e.Error
}

func TestAdminListenerIsLocked(t *testing.T) {
	n := startLockedNode(t)
	bearer := "Bearer " + testAdminToken
	files := func(path string) string {
		b, _ := json.Marshal(adminapi.SendFileRequest{Path: path, To: "orders"})
		return string(b)
	}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		code               int
		reason             string // in the JSON error
	}{
		{"no token", "GET", "/api/status", nil, "", 401, "bearer token"},
		{"wrong token", "GET", "/api/queues", map[string]string{"Authorization": bearer + "x"}, "", 401, "bearer token"},
		{"token", "GET", "/api/status", map[string]string{"Authorization": bearer}, "", 200, ""},
		{"probe without a token", "GET", "/healthz", nil, "", 200, ""},
		{"scrape without a token", "GET", "/metrics", nil, "", 200, ""},
		{"text/plain post", "POST", "/api/send", map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}, `{"to":"orders","text":"x"}`, 415, "application/json"},
		{"json post", "POST", "/api/send", map[string]string{"Authorization": bearer, "Content-Type": "application/json"}, `{"to":"orders","text":"x"}`, 200, ""},
		{"foreign host", "GET", "/api/status", map[string]string{"Authorization": bearer, "Host": "rebound.example:80"}, "", 403, "admin.hosts"},
		{"foreign host, no token", "GET", "/healthz", map[string]string{"Host": "rebound.example"}, "", 403, "admin.hosts"},
		{"foreign origin", "POST", "/api/send", map[string]string{"Authorization": bearer, "Content-Type": "application/json", "Origin": "http://attacker.example"}, `{"to":"orders","text":"x"}`, 403, "origin"},
		{"own origin", "GET", "/api/status", map[string]string{"Authorization": bearer, "Origin": "http://" + n.admin}, "", 200, ""},
		{"file outside the roots", "POST", "/api/files", map[string]string{"Authorization": bearer, "Content-Type": "application/json"}, files(filepath.Join(n.otherDir, "secret.txt")), 403, "admin.file_roots"},
		{"file out by ..", "POST", "/api/files", map[string]string{"Authorization": bearer, "Content-Type": "application/json"}, files(n.outDir + "/../other/secret.txt"), 403, "admin.file_roots"},
		{"file inside the roots", "POST", "/api/files", map[string]string{"Authorization": bearer, "Content-Type": "application/json"}, files(filepath.Join(n.outDir, "in.txt")), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, authn, reason := adminRequest(t, tc.method, n.admin, tc.path, tc.header, tc.body)
			if code != tc.code || !strings.Contains(reason, tc.reason) {
				t.Fatalf("%d %q, want %d and an error with %q", code, reason, tc.code, tc.reason)
			}
			if (code == 401) != strings.HasPrefix(authn, "Bearer") {
				t.Errorf("status %d with WWW-Authenticate %q", code, authn)
			}
		})
	}
	t.Run("modes", func(t *testing.T) {
		for path, want := range map[string]os.FileMode{n.dataDir: 0o700, filepath.Join(n.dataDir, adminapi.SocketName): 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s has mode %04o, want %04o", path, got, want)
			}
		}
	})
}

// runPetrelEnv runs the binary with args and env added to its environment.
func runPetrelEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, petrelBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(append([]string{}, petrelEnv...), env...)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if ctx.Err() != nil || err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("petrel %q: %v (%v)\nstderr:\n%s", args, err, ctx.Err(), &stderr)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

func TestCLISendsTheAdminToken(t *testing.T) {
	n := startLockedNode(t)
	noToken := []string{"PETREL_ADMIN_TOKEN="}
	r := runPetrelEnv(t, noToken, "queues", "--server", n.admin)
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stderr, "--token-file or $PETREL_ADMIN_TOKEN") {
		t.Errorf("stderr does not say how to give the token:\n%s", r.stderr)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	writeFile(t, wrong, "not-the-token-0123456789\n")
	runPetrelEnv(t, noToken, "queues", "--server", n.admin, "--token-file", wrong).wantCode(t, exitFailure)

	runPetrelEnv(t, []string{"PETREL_ADMIN_TOKEN=" + testAdminToken}, "send", "orders", "by env", "--server", n.admin).wantCode(t, exitOK)
	runPetrelEnv(t, noToken, "send", "orders", "by file", "--server", n.admin, "--token-file", n.tokenFile).wantCode(t, exitOK)
	// The flag wins over the environment.
	runPetrelEnv(t, []string{"PETREL_ADMIN_TOKEN=wrong"}, "stat", "--server", n.admin, "--token-file", n.tokenFile, "--json").wantCode(t, exitOK)
	r = runPetrelEnv(t, noToken, "sendfile", filepath.Join(n.otherDir, "secret.txt"), "orders@a", "--server", n.admin, "--token-file", n.tokenFile, "--no-wait")
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stderr, "admin.file_roots") {
		t.Errorf("sendfile outside the roots: stderr does not name admin.file_roots:\n%s", r.stderr)
	}
	// The socket needs no token.
	r = runPetrelEnv(t, noToken, "recv", "orders", "--count", "2", "--data-dir", n.dataDir)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "by env") || !strings.Contains(r.stdout, "by file") {
		t.Errorf("recv over the socket did not get both messages:\n%s", r.stdout)
	}
}

func TestAdminRefusesToStartExposed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, admin string
		where       string // file:line the error must name
		reason      string
	}{
		{"every interface without a token", "admin:\n  listen: \"0.0.0.0:0\"\n", ":3", "set admin.token_file"},
		{"token file open to others", "admin:\n  listen: \"127.0.0.1:0\"\n  token_file: " + filepath.Join(dir, "open.token") + "\n", ":4", "chmod 600 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := filepath.Join(dir, "open.token")
			writeFile(t, open, testAdminToken)
			if err := os.Chmod(open, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(t.TempDir(), "a.yaml")
			writeFile(t, cfg, "node: {name: a, data_dir: "+filepath.Join(t.TempDir(), "data")+"}\n"+tc.admin)
			r := runPetrel(t, 20*time.Second, "node", "-c", cfg)
			if r.code == exitOK {
				t.Fatalf("node started\nstderr:\n%s", r.stderr)
			}
			if !strings.Contains(r.stderr, cfg+tc.where) || !strings.Contains(r.stderr, tc.reason) {
				t.Errorf("stderr does not name %s%s and %q:\n%s", cfg, tc.where, tc.reason, r.stderr)
			}
		})
	}
}

// TestServerFlagUsage: a --server that names no admin listener is a usage
// error (exit 2) that says what is wrong with it, not "no node answers"
// with a network error, as if the node were down.
func TestServerFlagUsage(t *testing.T) {
	for _, tc := range []struct{ server, stderr string }{
		{"a b", `invalid character " " in host name`},
		{"ftp://x:1", `scheme "ftp"`},
		{"http://:7480", "no host"},
		{"http://u:p@127.0.0.1:7480", "without a query, fragment or user"},
	} {
		t.Run(tc.server, func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, "queues", "--server", tc.server)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) || strings.Contains(r.stderr, "no node answers") {
				t.Errorf("stderr lacks %q, or blames the node:\n%s", tc.stderr, r.stderr)
			}
		})
	}
}
